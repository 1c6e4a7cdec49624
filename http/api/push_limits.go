package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"

	"github.com/queen-mq/queen/raftgroups"
	"github.com/queen-mq/queen/tenancy"
	"github.com/queen-mq/queen/wire"
)

// Work per push is bounded twice: by the items one request may hold
// (QUEEN_MAX_PUSH_ITEMS) and by the items one tenant may have in flight
// over all its pushes at once (QUEEN_TENANT_MAX_INFLIGHT_PUSH_ITEMS). A
// push of 600k small items fits the body cap but grew a node by 1.3 GB:
// each item becomes a record, an id, a placement and an answer.
const (
	DefaultMaxPushItems              = 10000
	DefaultTenantMaxInflightPushItem = 100000
)

// readPushItems decodes a push body, refusing it as soon as its items
// array holds more than max items, so what is decoded stays bounded by the
// cap, not by the body. Unknown fields are ignored, as readJSON does.
func readPushItems(body []byte, max int) ([]pushItem, error) {
	if len(bytes.TrimSpace(body)) == 0 {
		return nil, badRequest("request body is empty")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	malformed := func(err error) error { return badRequest("malformed JSON: " + err.Error()) }
	if tok, err := dec.Token(); err != nil {
		return nil, malformed(err)
	} else if tok != json.Delim('{') {
		return nil, badRequest("malformed JSON: the body must be an object")
	}
	var items []pushItem
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, malformed(err)
		}
		if key, _ := tok.(string); key != "items" {
			var skip json.RawMessage
			if err := dec.Decode(&skip); err != nil {
				return nil, malformed(err)
			}
			continue
		}
		if items, err = readItemsArray(dec, max); err != nil {
			return nil, err
		}
	}
	if _, err := dec.Token(); err != nil { // the closing '}'
		return nil, malformed(err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, badRequest("malformed JSON: data after the object")
	}
	return items, nil
}

// readItemsArray decodes the items array (null: none) up to max items.
func readItemsArray(dec *json.Decoder, max int) ([]pushItem, error) {
	tok, err := dec.Token()
	switch {
	case err != nil:
		return nil, badRequest("malformed JSON: " + err.Error())
	case tok == nil:
		return nil, nil
	case tok != json.Delim('['):
		return nil, badRequest("items must be an array")
	}
	var items []pushItem
	for dec.More() {
		if len(items) == max {
			return nil, badRequest("a push holds at most " + strconv.Itoa(max) + " items (QUEEN_MAX_PUSH_ITEMS)")
		}
		var it pushItem
		if err := dec.Decode(&it); err != nil {
			return nil, badRequest("malformed JSON: " + err.Error())
		}
		items = append(items, it)
	}
	if _, err := dec.Token(); err != nil { // the closing ']'
		return nil, badRequest("malformed JSON: " + err.Error())
	}
	return items, nil
}

// errTenantBusy refuses a push over the tenant's in-flight items: 429
// overloaded with Retry-After, nothing proposed.
var errTenantBusy = fmt.Errorf("%w: the tenant's pushes in flight hold QUEEN_TENANT_MAX_INFLIGHT_PUSH_ITEMS items", raftgroups.ErrOverloaded)

// takePushItems reserves a push's n items against its tenant's in-flight
// bound; release gives them back.
func takePushItems(bound *tenancy.Inflight, tenant wire.ID, n int) (release func(), err error) {
	release, ok := bound.Take(tenant, n)
	if !ok {
		return nil, errTenantBusy
	}
	return release, nil
}
