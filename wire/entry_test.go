package wire

import "testing"

func TestEntryIDSurvivesRetryAndIsOptional(t *testing.T) {
	cmds := []Command{{Kind: KindTick}}
	a, b := AppendEntry(nil, 5, cmds), AppendEntry(nil, 5, cmds)
	ea, err := ParseEntry(a)
	if err != nil || ea.ID == 0 || ea.NowMs != 5 || ea.Count != 1 {
		t.Fatalf("%v %+v", err, ea)
	}
	if eb, _ := ParseEntry(b); eb.ID == ea.ID {
		t.Fatal("two proposals share an id")
	}
	if r, _ := ParseEntry(MarkRetry(a)); !r.Retry || r.ID != ea.ID || r.NowMs != 5 {
		t.Fatalf("retry lost the proposal's id or stamp: %+v", r)
	}
	// Entries without an id (written before ids existed) still parse.
	old, err := ParseEntry(AppendEntryID(nil, 7, 0, cmds))
	if err != nil || old.ID != 0 || old.NowMs != 7 || old.Count != 1 {
		t.Fatalf("%v %+v", err, old)
	}
	if c, ok := old.Next(); !ok || c.Kind != KindTick || old.Err() != nil {
		t.Fatalf("%v %v %v", c, ok, old.Err())
	}
	// A truncated id is malformed, never a panic.
	if _, err := ParseEntry(a[:6]); err == nil {
		t.Fatal("truncated id accepted")
	}
}
