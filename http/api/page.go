package api

import (
	"cmp"
	"encoding/base64"
	"encoding/json"
	"slices"

	"github.com/valyala/fasthttp"

	"github.com/queen-mq/queen/storage"
)

// Paged listings (docs/decisions.md, "Paged views"). A listing that can
// grow with queues or partitions answers at most `limit` items and, when
// more follow, an opaque `nextCursor` naming the last item's key: the next
// page resumes strictly after that key, so items inserted meanwhile never
// shift a page (they show up on a later page or, keyed before the cursor,
// not at all) and no item is listed twice. The key is the listing's sort
// order. Listings whose answer is a JSON array or an object keyed by name
// carry the cursor in the nextCursorHeader header only; object answers
// carry it in both.

// nextCursorHeader carries the next page's cursor (absent at the end).
const nextCursorHeader = "Queen-Next-Cursor"

// pageReq is a request's paging: limit, the legacy offset (skipped after
// the cursor) and the raw cursor.
type pageReq struct {
	limit  int
	offset int
	cursor string
}

// readPage reads limit (default def, at most max), offset and cursor.
func readPage(ctx *fasthttp.RequestCtx, def, max int) (pageReq, error) {
	limit, err := intArg(ctx, "limit", def, 1, max)
	if err != nil {
		return pageReq{}, err
	}
	offset, err := intArg(ctx, "offset", 0, 0, 1<<30)
	if err != nil {
		return pageReq{}, err
	}
	return pageReq{limit: limit, offset: offset, cursor: strArg(ctx, "cursor")}, nil
}

// after decodes the cursor into k; false without one.
func (p pageReq) after(k any) (bool, error) {
	if p.cursor == "" {
		return false, nil
	}
	b, err := base64.RawURLEncoding.DecodeString(p.cursor)
	if err != nil || json.Unmarshal(b, k) != nil {
		return false, badRequest("cursor must be a nextCursor this listing answered")
	}
	return true, nil
}

// encodeCursor is the opaque cursor naming key k.
func encodeCursor(k any) *string {
	b, err := json.Marshal(k)
	if err != nil {
		return nil // keys are plain structs of strings and numbers
	}
	s := base64.RawURLEncoding.EncodeToString(b)
	return &s
}

// pageOf returns the items after p's cursor (items are sorted by key as
// cmpKey orders them), less p.offset, at most p.limit, and the cursor of
// the next page, nil at the end.
func pageOf[T, K any](p pageReq, items []T, key func(*T) K, cmpKey func(a, b K) int) ([]T, *string, error) {
	var from K
	ok, err := p.after(&from)
	if err != nil {
		return nil, nil, err
	}
	start := 0
	if ok {
		start, _ = slices.BinarySearchFunc(items, from, func(it T, k K) int {
			if c := cmpKey(key(&it), k); c != 0 {
				return c
			}
			return -1 // the cursor's own item comes before: resume after it
		})
	}
	start = min(start+p.offset, len(items))
	end := min(start+p.limit, len(items))
	var next *string
	if end < len(items) {
		next = encodeCursor(key(&items[end-1]))
	}
	return items[start:end], next, nil
}

// setNextCursor puts the next page's cursor in the header.
func setNextCursor(ctx *fasthttp.RequestCtx, next *string) {
	if next != nil {
		ctx.Response.Header.Set(nextCursorHeader, *next)
	}
}

// Page keys of the listings, in their sort order.

// nameKey orders queues (and labels) by name.
type nameKey struct {
	N string `json:"n"`
}

func cmpName(a, b nameKey) int { return cmp.Compare(a.N, b.N) }

func queueKey(q *storage.QueueView) nameKey { return nameKey{q.Name} }

// partKey orders partitions by queue then index.
type partKey struct {
	Q string `json:"q,omitempty"`
	I int64  `json:"i"`
}

func cmpPart(a, b partKey) int { return cmp.Or(cmp.Compare(a.Q, b.Q), cmp.Compare(a.I, b.I)) }

// groupKey orders consumer-group rows by group, queue, then partition
// index (-1 for a row about the whole queue).
type groupKey struct {
	G string `json:"g"`
	Q string `json:"q"`
	I int64  `json:"i"`
}

func cmpGroup(a, b groupKey) int {
	return cmp.Or(cmp.Compare(a.G, b.G), cmp.Compare(a.Q, b.Q), cmp.Compare(a.I, b.I))
}

// eachPartition calls visit for every partition of qs, by queue then
// index, saying whether it is on the page p asks for (the others count in
// totals); it returns the next page's cursor, also set in the header.
func eachPartition(ctx *fasthttp.RequestCtx, p pageReq, qs []storage.QueueView, visit func(q *storage.QueueView, pv *storage.PartitionView, onPage bool)) (*string, error) {
	var from partKey
	hasFrom, err := p.after(&from)
	if err != nil {
		return nil, err
	}
	skipped, taken := 0, 0
	var last partKey
	var next *string
	for qi := range qs {
		for pi := range qs[qi].Partitions {
			pv := &qs[qi].Partitions[pi]
			k := partKey{Q: qs[qi].Name, I: int64(pv.Index)}
			on := false
			switch {
			case hasFrom && cmpPart(k, from) <= 0:
			case skipped < p.offset:
				skipped++
			case taken == p.limit:
				if next == nil {
					next = encodeCursor(last)
				}
			default:
				on, last = true, k
				taken++
			}
			visit(&qs[qi], pv, on)
		}
	}
	setNextCursor(ctx, next)
	return next, nil
}
