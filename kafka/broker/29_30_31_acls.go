package broker

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/queen-mq/queen/kafka"
	"github.com/queen-mq/queen/tenancy/acl"
)

// DescribeAcls (29), CreateAcls (30) and DeleteAcls (31), every version
// kmsg knows, on the node's acl.Authorizer (docs/acls.md). With ACLs off
// (QUEEN_ACLS unset) they answer SECURITY_DISABLED, as Kafka does without
// an authorizer. On, who may call them is Kafka's: DESCRIBE on the cluster
// to describe, ALTER on the cluster to create and delete (super users
// pass); the bindings read and changed are those of the login's tenant
// only. Enum values are kmsg's, so a cast converts them.

// aclCode is the Kafka error code of an authorizer error.
func aclCode(err error) int16 {
	switch {
	case err == nil:
		return 0
	case errors.Is(err, acl.ErrDisabled):
		return kerr.SecurityDisabled.Code
	case errors.Is(err, acl.ErrInvalid):
		return kerr.InvalidRequest.Code
	case errors.Is(err, acl.ErrLimit):
		return kerr.PolicyViolation.Code
	}
	return errorCode(err)
}

// str is a nullable Kafka string as a filter's: nil matches any.
func str(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// aclClusterRefusal is the code refusing an ACL API to c: it needs op on
// the cluster.
func (b *Broker) aclClusterRefusal(c *kafka.Conn, op acl.Operation) int16 {
	if !b.cfg.ACL.Enabled() {
		return kerr.SecurityDisabled.Code
	}
	if !b.allowed(c, acl.ResourceCluster, acl.ClusterName, op) {
		return kerr.ClusterAuthorizationFailed.Code
	}
	return 0
}

func (b *Broker) handleDescribeACLs(ctx context.Context, c *kafka.Conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DescribeACLsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeACLsResponse)
	if code := b.aclClusterRefusal(c, acl.OpDescribe); code != 0 {
		resp.ErrorCode = code
		return resp, nil
	}
	f := acl.Filter{Resource: acl.ResourceType(req.ResourceType), Name: str(req.ResourceName), Pattern: acl.PatternType(req.ResourcePatternType),
		Principal: str(req.Principal), Host: str(req.Host), Op: acl.Operation(req.Operation), Perm: acl.Permission(req.PermissionType)}
	if err := acl.ValidateFilter(f); err != nil {
		resp.ErrorCode, resp.ErrorMessage = aclCode(err), errorMessage(err)
		return resp, nil
	}
	// Read-your-writes across nodes: a binding created through another
	// node is listed at once.
	if err := b.cfg.ACL.Refresh(ctx); err != nil {
		resp.ErrorCode, resp.ErrorMessage = errorCode(err), errorMessage(err)
		return resp, nil
	}
	// Bindings come sorted by resource then entry: one resource answer
	// per run of the same resource pattern.
	for _, bd := range b.cfg.ACL.Describe(aclTenant(b.tenantOf(c)), f) {
		n := len(resp.Resources)
		if n == 0 || resp.Resources[n-1].ResourceType != kmsg.ACLResourceType(bd.Resource) ||
			resp.Resources[n-1].ResourceName != bd.Name || resp.Resources[n-1].ResourcePatternType != kmsg.ACLResourcePatternType(bd.Pattern) {
			r := kmsg.NewDescribeACLsResponseResource()
			r.ResourceType, r.ResourceName, r.ResourcePatternType = kmsg.ACLResourceType(bd.Resource), bd.Name, kmsg.ACLResourcePatternType(bd.Pattern)
			resp.Resources = append(resp.Resources, r)
			n++
		}
		a := kmsg.NewDescribeACLsResponseResourceACL()
		a.Principal, a.Host, a.Operation, a.PermissionType = bd.Principal, bd.Host, kmsg.ACLOperation(bd.Op), kmsg.ACLPermissionType(bd.Perm)
		resp.Resources[n-1].ACLs = append(resp.Resources[n-1].ACLs, a)
	}
	return resp, nil
}

func (b *Broker) handleCreateACLs(ctx context.Context, c *kafka.Conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.CreateACLsRequest)
	resp := req.ResponseKind().(*kmsg.CreateACLsResponse)
	resp.Results = make([]kmsg.CreateACLsResponseResult, len(req.Creations))
	for i := range resp.Results {
		resp.Results[i] = kmsg.NewCreateACLsResponseResult()
	}
	if code := b.aclClusterRefusal(c, acl.OpAlter); code != 0 {
		for i := range resp.Results {
			resp.Results[i].ErrorCode = code
		}
		return resp, nil
	}
	// Each creation is checked on its own (Kafka answers per creation);
	// the valid ones are stored together.
	var valid []acl.Binding
	var at []int
	for i, cr := range req.Creations {
		bd := acl.Binding{Resource: acl.ResourceType(cr.ResourceType), Name: cr.ResourceName, Pattern: acl.PatternType(cr.ResourcePatternType),
			Principal: cr.Principal, Host: cr.Host, Op: acl.Operation(cr.Operation), Perm: acl.Permission(cr.PermissionType)}
		if err := acl.Validate(bd); err != nil {
			resp.Results[i].ErrorCode, resp.Results[i].ErrorMessage = aclCode(err), errorMessage(err)
			continue
		}
		valid, at = append(valid, bd), append(at, i)
	}
	if err := b.cfg.ACL.Create(ctx, aclTenant(b.tenantOf(c)), valid); err != nil {
		for _, i := range at {
			resp.Results[i].ErrorCode, resp.Results[i].ErrorMessage = aclCode(err), errorMessage(err)
		}
	}
	return resp, nil
}

func (b *Broker) handleDeleteACLs(ctx context.Context, c *kafka.Conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DeleteACLsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteACLsResponse)
	resp.Results = make([]kmsg.DeleteACLsResponseResult, len(req.Filters))
	for i := range resp.Results {
		resp.Results[i] = kmsg.NewDeleteACLsResponseResult()
	}
	if code := b.aclClusterRefusal(c, acl.OpAlter); code != 0 {
		for i := range resp.Results {
			resp.Results[i].ErrorCode = code
		}
		return resp, nil
	}
	var valid []acl.Filter
	var at []int
	for i, f := range req.Filters {
		af := acl.Filter{Resource: acl.ResourceType(f.ResourceType), Name: str(f.ResourceName), Pattern: acl.PatternType(f.ResourcePatternType),
			Principal: str(f.Principal), Host: str(f.Host), Op: acl.Operation(f.Operation), Perm: acl.Permission(f.PermissionType)}
		if err := acl.ValidateFilter(af); err != nil {
			resp.Results[i].ErrorCode, resp.Results[i].ErrorMessage = aclCode(err), errorMessage(err)
			continue
		}
		valid, at = append(valid, af), append(at, i)
	}
	if len(valid) == 0 {
		return resp, nil
	}
	matched, err := b.cfg.ACL.Delete(ctx, aclTenant(b.tenantOf(c)), valid)
	for j, i := range at {
		if err != nil {
			resp.Results[i].ErrorCode, resp.Results[i].ErrorMessage = aclCode(err), errorMessage(err)
			continue
		}
		for _, bd := range matched[j] {
			m := kmsg.NewDeleteACLsResponseResultMatchingACL()
			m.ResourceType, m.ResourceName, m.ResourcePatternType = kmsg.ACLResourceType(bd.Resource), bd.Name, kmsg.ACLResourcePatternType(bd.Pattern)
			m.Principal, m.Host = bd.Principal, bd.Host
			m.Operation, m.PermissionType = kmsg.ACLOperation(bd.Op), kmsg.ACLPermissionType(bd.Perm)
			resp.Results[i].MatchingACLs = append(resp.Results[i].MatchingACLs, m)
		}
	}
	return resp, nil
}
