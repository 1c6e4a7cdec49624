package api

import "github.com/valyala/fasthttp"

// proxiedSystemKey marks a request the embedded proxy makes on its own
// account (ProxiedSystem).
const proxiedSystemKey = "queen.proxied-system"

// ProxiedSystem marks a request the embedded proxy makes in-process on
// its own account, not a credential's: its storage quota reading the
// queues' sizes, the control plane's calls (which the cell's operator, who
// holds every cluster, makes). No tenant's ACL applies to it, as none
// applies to a request a peer relays: a tenant's bindings say what its
// principals may do, and the proxy is none of them. A client cannot set a
// user value, so it cannot claim this; the data plane never sets it (its
// requests carry their credential's principal, ProxiedPrincipal).
func ProxiedSystem(ctx *fasthttp.RequestCtx) { ctx.SetUserValue(proxiedSystemKey, true) }

func proxiedSystem(ctx *fasthttp.RequestCtx) bool {
	v, _ := ctx.UserValue(proxiedSystemKey).(bool)
	return v
}
