package api

import (
	"github.com/valyala/fasthttp"

	"github.com/queen-mq/queen/wire"
)

// The embedded proxy's entry into the API: it calls Handler in-process
// with requests it authenticated, marked with Proxied, and may ask the
// push route to show it the items it reads (ProxiedPush) so a plan's
// limits apply without the proxy reading the body a second time.

// proxiedKey is where a request the embedded proxy hands in keeps its
// tenant. User values cannot be set by a client, so unlike the
// x-queen-tenant header it needs no trusted-proxy assertion.
const proxiedKey = "queen.proxied-tenant"

// Proxied marks a request as authenticated and authorized by the embedded
// proxy, acting for tenant: Handler then skips the broker's own JWT check
// and scopes the request by tenant whatever QUEEN_TENANCY_HEADER says.
func Proxied(ctx *fasthttp.RequestCtx, tenant wire.ID) { ctx.SetUserValue(proxiedKey, tenant) }

func proxiedTenant(ctx *fasthttp.RequestCtx) (wire.ID, bool) {
	id, ok := ctx.UserValue(proxiedKey).(wire.ID)
	return id, ok
}

// PushItem is what a push check sees of one item.
type PushItem struct {
	Queue, Partition string
	PayloadBytes     int
}

// PushRefusal is a push check's refusal: the answer's status, code and
// message.
type PushRefusal struct {
	Status        int
	Code, Message string
}

// PushCheck judges a push's items before anything is written.
type PushCheck func([]PushItem) *PushRefusal

const pushCheckKey = "queen.push-check"

// ProxiedPush has the push route run check on the items once it has read
// them; a refusal answers the request and writes nothing.
func ProxiedPush(ctx *fasthttp.RequestCtx, check PushCheck) { ctx.SetUserValue(pushCheckKey, check) }

// checkProxiedPush runs the request's push check, if it has one.
func checkProxiedPush(ctx *fasthttp.RequestCtx, items []pushItem) error {
	check, ok := ctx.UserValue(pushCheckKey).(PushCheck)
	if !ok {
		return nil
	}
	view := make([]PushItem, len(items))
	for i := range items {
		view[i] = PushItem{Queue: items[i].Queue, Partition: items[i].Partition, PayloadBytes: len(items[i].Payload)}
		if view[i].Partition == "" {
			view[i].Partition = defaultPartition
		}
	}
	if r := check(view); r != nil {
		return &apiError{r.Status, r.Code, r.Message}
	}
	return nil
}
