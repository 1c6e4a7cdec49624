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

// A command whose body ends in a Tail is encoded as if Body and Tail were
// one body: the state machine cannot tell them apart.
func TestCommandTailEncodesAsOneBody(t *testing.T) {
	head, tail := []byte("header:"), []byte("the batch as it arrived")
	split := Command{Kind: KindKafkaProduce, Body: head, Tail: tail}
	whole := Command{Kind: KindKafkaProduce, Body: append(append([]byte(nil), head...), tail...)}
	if split.EncodedLen() != whole.EncodedLen() {
		t.Fatalf("EncodedLen %d, want %d", split.EncodedLen(), whole.EncodedLen())
	}
	a := AppendEntryID(nil, 5, 9, []Command{split, {Kind: KindTick}})
	b := AppendEntryID(nil, 5, 9, []Command{whole, {Kind: KindTick}})
	if string(a) != string(b) {
		t.Fatalf("entries differ:\n%q\n%q", a, b)
	}
	e, err := ParseEntry(a)
	if err != nil {
		t.Fatal(err)
	}
	c, ok := e.Next()
	if !ok || c.Kind != KindKafkaProduce || string(c.Body) != "header:the batch as it arrived" || c.Tail != nil {
		t.Fatalf("decoded %+v", c)
	}
}
