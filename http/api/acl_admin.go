package api

import (
	"net/http"

	"github.com/valyala/fasthttp"

	"github.com/queen-mq/queen/tenancy/acl"
)

// The ACL admin routes (docs/security.md "ACL admin over HTTP"): the
// HTTP face of Kafka's Describe/Create/DeleteAcls, on the request's tenant,
// admin level. With ACLs off each answers 400 security_disabled, as Kafka
// answers SECURITY_DISABLED without an authorizer. Behind the embedded
// proxy a cluster's key reaches them with the scopes its Kafka login
// needs for the ACL keys (tenancy/proxy/classify.go), acting as its
// principal in its cluster's tenant (Proxied, ProxiedPrincipal).

const aclsPath = "/api/v1/system/acls"

// aclJSON is one binding as the routes read and write it, with Kafka's
// enum names (TOPIC, PREFIXED, WRITE, ALLOW ...).
type aclJSON struct {
	ResourceType string `json:"resourceType"`
	ResourceName string `json:"resourceName"`
	PatternType  string `json:"patternType"`
	Principal    string `json:"principal"`
	Host         string `json:"host"`
	Operation    string `json:"operation"`
	Permission   string `json:"permission"`
}

// parseOr reads an enum name with parse (any case, '-' for '_'); "" is
// def.
func parseOr[T ~int8](what, s string, def T, parse func(string) (T, bool)) (T, error) {
	if s == "" {
		return def, nil
	}
	v, ok := parse(s)
	if !ok {
		return 0, badRequest(what + " " + s + " is not one of Kafka's names")
	}
	return v, nil
}

// bindingOf reads one binding to create; pattern defaults to LITERAL and
// host to "*". acl.Validate (in Create) refuses the rest as Kafka does.
func bindingOf(j *aclJSON) (acl.Binding, error) {
	b := acl.Binding{Name: j.ResourceName, Principal: j.Principal, Host: firstNonEmpty(j.Host, acl.WildcardHost)}
	var err error
	if b.Resource, err = parseOr("resourceType", j.ResourceType, 0, acl.ParseResourceType); err != nil {
		return b, err
	}
	if b.Pattern, err = parseOr("patternType", j.PatternType, acl.PatternLiteral, acl.ParsePatternType); err != nil {
		return b, err
	}
	if b.Op, err = parseOr("operation", j.Operation, 0, acl.ParseOperation); err != nil {
		return b, err
	}
	if b.Perm, err = parseOr("permission", j.Permission, 0, acl.ParsePermission); err != nil {
		return b, err
	}
	return b, acl.Validate(b)
}

// filterOf reads a filter from the query: a parameter absent matches
// anything (ANY); patternType MATCH selects what applies to resourceName.
func filterOf(args *fasthttp.Args) (acl.Filter, error) {
	f := acl.Filter{Name: string(args.Peek("resourceName")), Principal: string(args.Peek("principal")),
		Host: string(args.Peek("host"))}
	var err error
	if f.Resource, err = parseOr("resourceType", string(args.Peek("resourceType")), acl.ResourceAny, acl.ParseResourceType); err != nil {
		return f, err
	}
	if f.Pattern, err = parseOr("patternType", string(args.Peek("patternType")), acl.PatternAny, acl.ParsePatternType); err != nil {
		return f, err
	}
	if f.Op, err = parseOr("operation", string(args.Peek("operation")), acl.OpAny, acl.ParseOperation); err != nil {
		return f, err
	}
	if f.Perm, err = parseOr("permission", string(args.Peek("permission")), acl.PermAny, acl.ParsePermission); err != nil {
		return f, err
	}
	return f, acl.ValidateFilter(f)
}

func jsonOf(b *acl.Binding) aclJSON {
	return aclJSON{ResourceType: b.Resource.String(), ResourceName: b.Name, PatternType: b.Pattern.String(),
		Principal: b.Principal, Host: b.Host, Operation: b.Op.String(), Permission: b.Perm.String()}
}

func jsonsOf(bs []acl.Binding) []aclJSON {
	out := make([]aclJSON, len(bs))
	for i := range bs {
		out[i] = jsonOf(&bs[i])
	}
	return out
}

// aclsGet is GET /api/v1/system/acls[?resourceType=&resourceName=
// &patternType=&principal=&host=&operation=&permission=]: the tenant's
// bindings the filter matches.
func (s *Server) aclsGet(ctx *fasthttp.RequestCtx) error {
	if s.acl == nil {
		return acl.ErrDisabled
	}
	tenant, err := s.tenantOf(ctx)
	if err != nil {
		return err
	}
	f, err := filterOf(ctx.QueryArgs())
	if err != nil {
		return err
	}
	// What other nodes changed a moment ago too, not this node's last
	// refresh only.
	rctx, cancel := s.requestCtx(s.cfg.RequestTimeout)
	defer cancel()
	if err := s.acl.Refresh(rctx); err != nil {
		return err
	}
	writeJSON(ctx, http.StatusOK, map[string]any{"acls": jsonsOf(s.acl.Describe(aclTenant(tenant), f))})
	return nil
}

// maxACLsPerCall bounds one create: what one raft entry carries.
const maxACLsPerCall = 1000

// aclsPost is POST /api/v1/system/acls {"acls":[{...}]}: creates the
// bindings (all or none are valid), answered once raft committed them.
func (s *Server) aclsPost(ctx *fasthttp.RequestCtx) error {
	if s.acl == nil {
		return acl.ErrDisabled
	}
	var req struct {
		ACLs []aclJSON `json:"acls"`
	}
	tenant, err := s.tenantAndBody(ctx, &req)
	if err != nil {
		return err
	}
	if len(req.ACLs) == 0 || len(req.ACLs) > maxACLsPerCall {
		return badRequest("acls must hold 1..1000 bindings")
	}
	bs := make([]acl.Binding, len(req.ACLs))
	for i := range req.ACLs {
		if bs[i], err = bindingOf(&req.ACLs[i]); err != nil {
			return err
		}
	}
	rctx, cancel := s.requestCtx(s.cfg.RequestTimeout)
	defer cancel()
	if err := s.acl.Create(rctx, aclTenant(tenant), bs); err != nil {
		return err
	}
	writeJSON(ctx, http.StatusCreated, map[string]any{"created": jsonsOf(bs)})
	return nil
}

// aclsDelete is DELETE /api/v1/system/acls?<filter>: deletes the bindings
// the filter matches and answers them. A filter must name something: a
// bare DELETE would wipe every binding, so that takes ?all=true.
func (s *Server) aclsDelete(ctx *fasthttp.RequestCtx) error {
	if s.acl == nil {
		return acl.ErrDisabled
	}
	tenant, err := s.tenantOf(ctx)
	if err != nil {
		return err
	}
	args := ctx.QueryArgs()
	if args.Len() == 0 {
		return badRequest("name a filter (resourceType, resourceName, principal, ...) or all=true")
	}
	f, err := filterOf(args)
	if err != nil {
		return err
	}
	rctx, cancel := s.requestCtx(s.cfg.RequestTimeout)
	defer cancel()
	gone, err := s.acl.Delete(rctx, aclTenant(tenant), []acl.Filter{f})
	if err != nil {
		return err
	}
	var deleted []acl.Binding
	if len(gone) > 0 {
		deleted = gone[0]
	}
	writeJSON(ctx, http.StatusOK, map[string]any{"deleted": jsonsOf(deleted)})
	return nil
}
