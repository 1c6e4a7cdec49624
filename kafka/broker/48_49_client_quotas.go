package broker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/queen-mq/queen/kafka"
	"github.com/queen-mq/queen/wire"
)

// Client quotas, DescribeClientQuotas (48) and AlterClientQuotas (49),
// KIP-546. They are kept as SCRAM users are: in the default tenant's KV
// store (raft-replicated, no new entry kind), one JSON value per entity in
// a namespace HTTP clients cannot name, beside a generation counter
// (quotaGenKey) every change bumps. The key starts with the tenant the
// entity belongs to, so in tenancy mode a tenant's "user alice" is not
// another tenant's: a login sees and alters only its own tenant's
// entities, and enforcement looks only at them.

// quotaNS is the KV namespace of client quotas.
const quotaNS = "__kafka.client-quotas"

// Entity types and quota keys as Kafka names them.
const (
	quotaUser     = "user"
	quotaClientID = "client-id"
	quotaIP       = "ip"

	quotaProducerByteRate       = "producer_byte_rate"
	quotaConsumerByteRate       = "consumer_byte_rate"
	quotaRequestPercentage      = "request_percentage"
	quotaControllerMutationRate = "controller_mutation_rate"
)

// quotaKeys are the keys accepted for user and client-id entities, true
// for those Kafka types LONG (whole numbers), false for DOUBLE.
var quotaKeys = map[string]bool{
	quotaProducerByteRate:       true,
	quotaConsumerByteRate:       true,
	quotaRequestPercentage:      false,
	quotaControllerMutationRate: false,
}

// quotaAttempts bounds one entity's compare-and-set rounds.
const quotaAttempts = 5

// errQuotaInvalid is Kafka's INVALID_REQUEST for a quota request.
var errQuotaInvalid = errors.New("kafka: invalid client quota request")

func quotaCode(err error) int16 {
	switch {
	case err == nil:
		return 0
	case errors.Is(err, errQuotaInvalid):
		return kerr.InvalidRequest.Code
	case errors.Is(err, kerr.UnsupportedVersion):
		return kerr.UnsupportedVersion.Code
	}
	return errorCode(err)
}

// quotaMessage is the message of a quota refusal: errorMessage leaves
// out those errorCode does not know, and INVALID_REQUEST's says which
// part of the request was refused.
func quotaMessage(err error) *string {
	if errors.Is(err, errQuotaInvalid) || errors.Is(err, kerr.UnsupportedVersion) {
		s := err.Error()
		return &s
	}
	return errorMessage(err)
}

// quotaEntity is one entity: a user, a client id, or both. A present part
// with a nil name is that type's default entity.
type quotaEntity struct {
	HasUser   bool    `json:"hasUser,omitempty"`
	User      *string `json:"user,omitempty"`
	HasClient bool    `json:"hasClient,omitempty"`
	Client    *string `json:"client,omitempty"`
}

// storedQuota is one entity's KV value.
type storedQuota struct {
	Tenant wire.ID            `json:"tenant"`
	Entity quotaEntity        `json:"entity"`
	Values map[string]float64 `json:"values"`
}

// key is the entity's KV key: the tenant, then each part as absent,
// default or named, so no two entities share one.
func (e quotaEntity) key(tenant wire.ID) string {
	part := func(has bool, name *string) string {
		switch {
		case !has:
			return "-"
		case name == nil:
			return "*"
		}
		return "=" + *name
	}
	b, _ := json.Marshal([2]string{part(e.HasUser, e.User), part(e.HasClient, e.Client)})
	return tenant.String() + "/" + string(b)
}

// parts is the entity in Kafka's response form.
func (e quotaEntity) parts() [][2]*string {
	var out [][2]*string
	if e.HasUser {
		t := quotaUser
		out = append(out, [2]*string{&t, e.User})
	}
	if e.HasClient {
		t := quotaClientID
		out = append(out, [2]*string{&t, e.Client})
	}
	return out
}

// quotaEntityOf checks an AlterClientQuotas entity as Kafka's
// ClientQuotaControlManager does: at least one part, each type once, user
// and client-id only (ip quotas are not kept), no empty name.
func quotaEntityOf(parts []kmsg.AlterClientQuotasRequestEntryEntity) (quotaEntity, error) {
	var e quotaEntity
	if len(parts) == 0 {
		return e, fmt.Errorf("%w: empty client quota entity", errQuotaInvalid)
	}
	for _, p := range parts {
		if p.Name != nil && *p.Name == "" {
			return e, fmt.Errorf("%w: empty %s not supported", errQuotaInvalid, p.Type)
		}
		switch p.Type {
		case quotaUser:
			if e.HasUser {
				return e, fmt.Errorf("%w: duplicate entity entry %s", errQuotaInvalid, p.Type)
			}
			e.HasUser, e.User = true, p.Name
		case quotaClientID:
			if e.HasClient {
				return e, fmt.Errorf("%w: duplicate entity entry %s", errQuotaInvalid, p.Type)
			}
			e.HasClient, e.Client = true, p.Name
		case quotaIP:
			return e, fmt.Errorf("%w: queen keeps no ip quotas", errQuotaInvalid)
		default:
			return e, fmt.Errorf("%w: unhandled client quota entity type %q", errQuotaInvalid, p.Type)
		}
	}
	return e, nil
}

// checkQuotaOps checks one entity's operations: known keys, each once, a
// value above zero, whole for the LONG keys (Kafka's validateQuotaKeyValue).
func checkQuotaOps(ops []kmsg.AlterClientQuotasRequestEntryOp) error {
	seen := map[string]bool{}
	for _, op := range ops {
		long, ok := quotaKeys[op.Key]
		if !ok {
			return fmt.Errorf("%w: invalid configuration key %q", errQuotaInvalid, op.Key)
		}
		if seen[op.Key] {
			return fmt.Errorf("%w: quota key %s named twice", errQuotaInvalid, op.Key)
		}
		seen[op.Key] = true
		if op.Remove {
			continue
		}
		switch {
		case math.IsNaN(op.Value) || math.IsInf(op.Value, 0) || op.Value <= 0:
			return fmt.Errorf("%w: quota %s must be greater than 0", errQuotaInvalid, op.Key)
		case long && op.Value > math.MaxInt64:
			return fmt.Errorf("%w: proposed value for %s is too large for a LONG", errQuotaInvalid, op.Key)
		case long && math.Abs(math.Mod(op.Value, 1)) > 1e-6:
			return fmt.Errorf("%w: value %v for %s must be an integer", errQuotaInvalid, op.Value, op.Key)
		}
	}
	return nil
}

// handleAlterClientQuotas (key 49, v0-1) sets and removes quotas, each
// entity's operations one compare-and-set of its KV value, acknowledged
// once raft commits it; validate_only checks and writes nothing. An
// entity left with no value is deleted.
func (b *Broker) handleAlterClientQuotas(ctx context.Context, c *kafka.Conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.AlterClientQuotasRequest)
	resp := req.ResponseKind().(*kmsg.AlterClientQuotasResponse)
	tenant := b.tenantOf(c)
	if !req.ValidateOnly && len(req.Entries) > 0 {
		// The compare-and-set below would refuse a stale read.
		_ = b.catchUpKV(ctx, wire.DefaultTenant)
	}
	plan := planQuotasOf(c)
	for _, entry := range req.Entries {
		e, err := quotaEntityOf(entry.Entity)
		if err == nil {
			err = checkPlanOps(plan, entry.Ops)
		}
		if err == nil {
			err = checkQuotaOps(entry.Ops)
		}
		if err == nil && !req.ValidateOnly {
			err = b.alterQuota(ctx, tenant, e, entry.Ops)
		}
		r := kmsg.NewAlterClientQuotasResponseEntry()
		r.ErrorCode, r.ErrorMessage = quotaCode(err), quotaMessage(err)
		for _, p := range entry.Entity {
			re := kmsg.NewAlterClientQuotasResponseEntryEntity()
			re.Type, re.Name = p.Type, p.Name
			r.Entity = append(r.Entity, re)
		}
		resp.Entries = append(resp.Entries, r)
	}
	return resp, nil
}

// alterQuota applies one entity's operations, compare-and-set on the
// version it read, read again after a racing change.
func (b *Broker) alterQuota(ctx context.Context, tenant wire.ID, e quotaEntity, ops []kmsg.AlterClientQuotasRequestEntryOp) error {
	cctx, cancel := context.WithTimeout(ctx, adminWait)
	defer cancel()
	key := e.key(tenant)
	if len(key) > wire.MaxKVKeyBytes {
		return fmt.Errorf("%w: entity name too long", errQuotaInvalid)
	}
	for range quotaAttempts {
		q := storedQuota{Tenant: tenant, Entity: e, Values: map[string]float64{}}
		var version uint64
		it, found, err := b.engine.KVStore(wire.DefaultTenant).KVGet(wire.DefaultTenant, quotaNS, []byte(key))
		if err != nil {
			return err
		}
		if found {
			version = it.Version
			var old storedQuota
			if err := json.Unmarshal(it.Value, &old); err != nil {
				return fmt.Errorf("kafka: client quota %s: %w", key, err)
			}
			for k, v := range old.Values {
				q.Values[k] = v
			}
		}
		for _, op := range ops {
			if op.Remove {
				delete(q.Values, op.Key)
			} else {
				q.Values[op.Key] = op.Value
			}
		}
		if !found && len(q.Values) == 0 {
			return nil // nothing to remove
		}
		// The generation moves in the same command, so every node's
		// refresher sees the change (client_quota_enforce.go).
		bump := b.engine.KVGeneration(quotaNS, quotaGenKey).Bump()
		written, err := b.replaceKV(cctx, wire.DefaultTenant, quotaNS, key, version, q, len(q.Values) == 0, bump)
		if err != nil {
			return err
		}
		if written {
			b.quotas.invalidate()
			return nil
		}
	}
	return fmt.Errorf("%w: client quota %s kept changing", context.DeadlineExceeded, key)
}

// quotaFilter is a DescribeClientQuotas filter: per entity type, a name
// (exact), nil (the default entity) or any (specified: named or default).
type quotaFilter struct {
	exact  map[string]*string
	any    map[string]bool
	strict bool
}

// quotaFilterOf checks DescribeClientQuotas components as Kafka's
// ClientQuotasImage.describe does: INVALID_REQUEST for an empty or
// repeated type or a match string that does not fit the match type,
// UNSUPPORTED_VERSION for an unknown type or match type.
func quotaFilterOf(req *kmsg.DescribeClientQuotasRequest) (quotaFilter, error) {
	f := quotaFilter{exact: map[string]*string{}, any: map[string]bool{}, strict: req.Strict}
	for _, c := range req.Components {
		t := c.EntityType
		if t == "" {
			return f, fmt.Errorf("%w: invalid empty entity type", errQuotaInvalid)
		}
		if _, ok := f.exact[t]; ok || f.any[t] {
			return f, fmt.Errorf("%w: entity type %s cannot appear more than once in the filter", errQuotaInvalid, t)
		}
		if t != quotaUser && t != quotaClientID && t != quotaIP {
			return f, fmt.Errorf("%w: unsupported entity type %s", kerr.UnsupportedVersion, t)
		}
		switch c.MatchType {
		case kmsg.QuotasMatchTypeExact:
			if c.Match == nil {
				return f, fmt.Errorf("%w: MATCH_TYPE_EXACT with a null match string", errQuotaInvalid)
			}
			f.exact[t] = c.Match
		case kmsg.QuotasMatchTypeDefault:
			if c.Match != nil {
				return f, fmt.Errorf("%w: MATCH_TYPE_DEFAULT with a match string", errQuotaInvalid)
			}
			f.exact[t] = nil
		case kmsg.QuotasMatchTypeAny:
			if c.Match != nil {
				return f, fmt.Errorf("%w: MATCH_TYPE_SPECIFIED with a match string", errQuotaInvalid)
			}
			f.any[t] = true
		default:
			return f, fmt.Errorf("%w: unknown match type %d", kerr.UnsupportedVersion, c.MatchType)
		}
	}
	_, ipExact := f.exact[quotaIP]
	_, userExact := f.exact[quotaUser]
	_, clientExact := f.exact[quotaClientID]
	if (ipExact || f.any[quotaIP]) && (userExact || clientExact || f.any[quotaUser] || f.any[quotaClientID]) {
		return f, fmt.Errorf("%w: an ip filter component cannot be used with user or client-id ones", errQuotaInvalid)
	}
	return f, nil
}

// matches is Kafka's ClientQuotasImage.matches.
func (f quotaFilter) matches(e quotaEntity) bool {
	has := map[string]bool{quotaUser: e.HasUser, quotaClientID: e.HasClient}
	name := map[string]*string{quotaUser: e.User, quotaClientID: e.Client}
	if f.strict {
		n := 0
		for _, h := range has {
			if h {
				n++
			}
		}
		if n != len(f.exact)+len(f.any) {
			return false
		}
	}
	for t, want := range f.exact {
		if !has[t] {
			return false
		}
		got := name[t]
		if (want == nil) != (got == nil) || want != nil && *want != *got {
			return false
		}
	}
	for t := range f.any {
		if !has[t] {
			return false
		}
	}
	return true
}

// handleDescribeClientQuotas (key 48, v0-1) lists the login's tenant's
// entities matching the filter with their values, on this node's replica
// caught up with the KV group's leader. A filter Kafka refuses answers
// its error for the whole request.
func (b *Broker) handleDescribeClientQuotas(ctx context.Context, c *kafka.Conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DescribeClientQuotasRequest)
	resp := req.ResponseKind().(*kmsg.DescribeClientQuotasResponse)
	f, err := quotaFilterOf(req)
	if err != nil {
		resp.ErrorCode, resp.ErrorMessage = quotaCode(err), quotaMessage(err)
		return resp, nil
	}
	_ = b.catchUpKV(ctx, wire.DefaultTenant) // read-your-writes; else this node's replica answers
	all, err := b.readQuotas(b.tenantOf(c))
	if err != nil {
		resp.ErrorCode, resp.ErrorMessage = errorCode(err), errorMessage(err)
		return resp, nil
	}
	all = withPlan(all, c)
	for _, q := range all {
		if !f.matches(q.Entity) || len(q.Values) == 0 {
			continue
		}
		r := kmsg.NewDescribeClientQuotasResponseEntry()
		for _, p := range q.Entity.parts() {
			re := kmsg.NewDescribeClientQuotasResponseEntryEntity()
			re.Type, re.Name = *p[0], p[1]
			r.Entity = append(r.Entity, re)
		}
		keys := make([]string, 0, len(q.Values))
		for k := range q.Values {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			v := kmsg.NewDescribeClientQuotasResponseEntryValue()
			v.Key, v.Value = k, q.Values[k]
			r.Values = append(r.Values, v)
		}
		resp.Entries = append(resp.Entries, r)
	}
	return resp, nil
}

// readQuotas is every stored quota entity of tenant on this node's
// replica, in key order.
func (b *Broker) readQuotas(tenant wire.ID) ([]storedQuota, error) {
	prefix := []byte(tenant.String() + "/")
	var out []storedQuota
	err := b.engine.KVStore(wire.DefaultTenant).KVEach(wire.DefaultTenant, quotaNS, prefix, func(it wire.KVItem) error {
		var q storedQuota
		if json.Unmarshal(it.Value, &q) == nil && q.Tenant == tenant {
			out = append(out, q)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// planQuotasOf is the plan's quota values of a login held to one (the
// embedded proxy's API keys, proxy_hooks.go); nil for other logins.
func planQuotasOf(c *kafka.Conn) map[string]float64 {
	id, ok := identityOf(c)
	if !ok || id.Policy == nil {
		return nil
	}
	return id.Policy.Quotas()
}

// checkPlanOps refuses an operation on a key the login's plan sets: the
// plan's values are read-only over Kafka (INVALID_REQUEST, as Kafka
// answers a key it does not accept), changed by the plan or the
// cluster's overrides only.
func checkPlanOps(plan map[string]float64, ops []kmsg.AlterClientQuotasRequestEntryOp) error {
	for _, op := range ops {
		if _, ok := plan[op.Key]; ok {
			return fmt.Errorf("%w: %s is the cluster's plan's, read-only over Kafka (change the plan or the cluster's overrides)", errQuotaInvalid, op.Key)
		}
	}
	return nil
}

// withPlan adds the login's plan quotas to its user entity (the API key's
// login name), merged with what is stored for that entity: a login held
// to a plan sees the plan's limits as its client quotas.
func withPlan(all []storedQuota, c *kafka.Conn) []storedQuota {
	plan := planQuotasOf(c)
	if len(plan) == 0 {
		return all
	}
	user := quotaUserOf(c)
	for i := range all {
		e := all[i].Entity
		if e.HasUser && e.User != nil && *e.User == user && !e.HasClient {
			merged := make(map[string]float64, len(all[i].Values)+len(plan))
			for k, v := range all[i].Values {
				merged[k] = v
			}
			for k, v := range plan {
				merged[k] = v
			}
			all[i].Values = merged
			return all
		}
	}
	return append(all, storedQuota{Entity: quotaEntity{HasUser: true, User: &user}, Values: plan})
}
