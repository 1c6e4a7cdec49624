package api

import (
	"fmt"
	"slices"
	"testing"
)

// Following nextCursor lists every item once, even when items are
// inserted before and after the cursor between pages.
func TestPageOfResumesAfterTheCursorKey(t *testing.T) {
	items := []string{"b", "d", "f", "h", "j"}
	key := func(s *string) nameKey { return nameKey{*s} }
	var got []string
	p := pageReq{limit: 2}
	for pages := 0; ; pages++ {
		if pages > 10 {
			t.Fatal("no end")
		}
		page, next, err := pageOf(p, items, key, cmpName)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, page...)
		if next == nil {
			break
		}
		p.cursor = *next
		// Inserted meanwhile: one before the cursor, one after.
		items = append(items, fmt.Sprint("a", pages), fmt.Sprint("z", pages))
		slices.Sort(items)
	}
	// Keys inserted after the cursor are listed; those before are not.
	if want := []string{"b", "d", "f", "h", "j", "z0", "z1", "z2"}; !slices.Equal(got, want) {
		t.Fatalf("paged %v, want %v", got, want)
	}
	seen := map[string]bool{}
	for _, s := range got {
		if seen[s] {
			t.Fatalf("%s listed twice: %v", s, got)
		}
		seen[s] = true
	}
}

func TestPageOfOffsetLimitAndBadCursor(t *testing.T) {
	items := []string{"a", "b", "c", "d"}
	key := func(s *string) nameKey { return nameKey{*s} }
	page, next, err := pageOf(pageReq{limit: 2, offset: 1}, items, key, cmpName)
	if err != nil || !slices.Equal(page, []string{"b", "c"}) || next == nil {
		t.Fatalf("offset 1: %v %v %v", page, next, err)
	}
	page, next, err = pageOf(pageReq{limit: 5, cursor: *next}, items, key, cmpName)
	if err != nil || !slices.Equal(page, []string{"d"}) || next != nil {
		t.Fatalf("after c: %v %v %v", page, next, err)
	}
	if _, _, err := pageOf(pageReq{limit: 5, cursor: "!!"}, items, key, cmpName); err == nil {
		t.Fatal("a cursor the server did not give was taken")
	}
}
