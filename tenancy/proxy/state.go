package proxy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/queen-mq/queen/raftgroups"
	"github.com/queen-mq/queen/tenancy"
	"github.com/queen-mq/queen/wire"
)

// The proxy's rows live in the replicated KV under the reserved system
// tenant (tenancy.SystemTenant), which no client request can address, in
// one namespace. Keys:
//
//	tenant/<slug>            Tenant
//	cluster/<id>             Cluster
//	cluster-slug/<slug>      ref{ID}
//	user/<id>                User
//	user-email/<email>       ref{ID}
//	key/<sha256 hex>         APIKey
//	key-id/<id>              ref{Hash}
//	plan/<code>              Plan
//	gen                      the invalidation feed: bumped by every change
//	usage/<cluster>/<minute>/<op>/<writer>   meterRow (meter.go)
const stateNS = "queen-proxy"

const genKey = "gen"

// Tenant is an organisation: users belong to it and it owns clusters.
type Tenant struct {
	ID     string `json:"id"`
	Slug   string `json:"slug"`
	Name   string `json:"name,omitempty"`
	Status string `json:"status"`
}

// Cluster is what clients talk to: a slug, a plan and a broker tenant of
// its own, so its queues, KV and timers are invisible to other clusters.
type Cluster struct {
	ID           string `json:"id"`
	Slug         string `json:"slug"`
	TenantID     string `json:"tenant_id"`
	TenantSlug   string `json:"tenant_slug"`
	BrokerTenant string `json:"broker_tenant_uuid"`
	Plan         string `json:"plan_code"`
	Status       string `json:"status"`
	// Overrides replace single limits of the plan; a present key with a
	// nil value is unlimited.
	Overrides Limits `json:"overrides"`
}

// User is a person; Roles maps cluster ids to the user's role there.
type User struct {
	ID           string            `json:"id"`
	TenantID     string            `json:"tenant_id"`
	Email        string            `json:"email"`
	PasswordHash string            `json:"password_hash,omitempty"`
	Roles        map[string]string `json:"roles"`
	Operator     bool              `json:"operator,omitempty"`
}

// APIKey is a key's stored form: never the key, only its sha256.
type APIKey struct {
	ID        string   `json:"id"`
	ClusterID string   `json:"cluster_id"`
	Name      string   `json:"name"`
	Hash      string   `json:"hash"`
	Scopes    []string `json:"scopes"`
	Revoked   bool     `json:"revoked,omitempty"`
}

// ref is an index row naming the row it points at.
type ref struct {
	ID   string `json:"id,omitempty"`
	Hash string `json:"hash,omitempty"`
}

// Errors of the state layer; errors.go maps them to HTTP answers.
var (
	// ErrUnavailable: the replicated KV did not answer (no majority, or
	// the node is shutting down).
	ErrUnavailable = errors.New("proxy: the replicated KV is unavailable")
	// ErrConflict: a row exists with other content than a retry implies.
	ErrConflict = errors.New("proxy: conflict")
)

// kvStore reads and writes the proxy's rows through the engine. Reads are
// linearizable: a read barrier on the system tenant's KV group, then this
// node's copy.
type kvStore struct {
	engine  *raftgroups.Engine
	timeout time.Duration
	// changed runs after this node changed the state, so its own cache
	// does not wait for the next poll of the feed.
	changed func()
}

func (s *kvStore) ctx(parent context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(parent, s.timeout)
}

// barrier makes this node's copy of the system tenant's KV current.
func (s *kvStore) barrier(ctx context.Context) error {
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	if err := s.engine.Barrier(ctx, s.engine.KVGroup(tenancy.SystemTenant)); err != nil {
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	return nil
}

// get reads one row into v; false when it does not exist.
func (s *kvStore) get(ctx context.Context, key string, v any) (bool, error) {
	if err := s.barrier(ctx); err != nil {
		return false, err
	}
	return s.getLocal(key, v)
}

// getLocal reads one row from this node's copy, with no barrier.
func (s *kvStore) getLocal(key string, v any) (bool, error) {
	it, found, err := s.engine.KVStore(tenancy.SystemTenant).KVGet(tenancy.SystemTenant, stateNS, []byte(key))
	if err != nil {
		return false, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	if !found {
		return false, nil
	}
	if err := json.Unmarshal(it.Value, v); err != nil {
		return false, fmt.Errorf("proxy: row %s: %w", key, err)
	}
	return true, nil
}

// scan calls fn with every row whose key starts with prefix, in key order,
// from after (exclusive; "" for the start), until fn returns false.
func (s *kvStore) scan(ctx context.Context, prefix, after string, fn func(key string, val []byte) bool) error {
	if err := s.barrier(ctx); err != nil {
		return err
	}
	store := s.engine.KVStore(tenancy.SystemTenant)
	var from []byte
	if after != "" {
		from = []byte(after)
	}
	for {
		items, err := store.KVList(tenancy.SystemTenant, stateNS, []byte(prefix), from, wire.MaxKVPrefixResult)
		if err != nil {
			return fmt.Errorf("%w: %w", ErrUnavailable, err)
		}
		for _, it := range items {
			if !fn(string(it.Key), it.Value) {
				return nil
			}
		}
		if len(items) < wire.MaxKVPrefixResult {
			return nil
		}
		from = items[len(items)-1].Key
	}
}

// apply writes ops as one unit and bumps the invalidation feed with them,
// so every node drops what it cached. False: a required op failed and
// nothing was written.
func (s *kvStore) apply(ctx context.Context, ops ...wire.KVOp) (bool, error) {
	ops = append(ops, wire.KVOp{Op: wire.KVIncr, NS: stateNS, Key: []byte(genKey), Delta: 1})
	ok, err := s.applyQuiet(ctx, ops...)
	if s.changed != nil {
		s.changed() // even on error: the write may have applied
	}
	return ok, err
}

// applyQuiet writes ops as one unit without bumping the feed (usage rows,
// which no cache holds).
func (s *kvStore) applyQuiet(ctx context.Context, ops ...wire.KVOp) (bool, error) {
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	res, err := s.engine.KV(ctx, &wire.KVCmd{Tenant: tenancy.SystemTenant, Ops: ops})
	if err != nil {
		return false, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	return res.OK, nil
}

// generation reads the invalidation feed's counter.
func (s *kvStore) generation(ctx context.Context) (uint64, error) {
	var n json.Number
	found, err := s.get(ctx, genKey, &n)
	if err != nil || !found {
		return 0, err
	}
	v, err := n.Int64()
	return uint64(v), err
}

// putOp writes v at key; ifAbsent makes it fail (and, required, fail the
// batch) when the key exists.
func putOp(key string, v any, ifAbsent bool) wire.KVOp {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("proxy: row %s does not encode: %v", key, err)) // our own types always encode
	}
	op := wire.KVOp{Op: wire.KVPut, NS: stateNS, Key: []byte(key), Value: b}
	if ifAbsent {
		op.Op, op.Required = wire.KVPutIfAbsent, true
	}
	return op
}

func deleteOp(key string) wire.KVOp {
	return wire.KVOp{Op: wire.KVDelete, NS: stateNS, Key: []byte(key)}
}

func tenantKey(slug string) string      { return "tenant/" + slug }
func clusterKey(id string) string       { return "cluster/" + id }
func clusterSlugKey(slug string) string { return "cluster-slug/" + slug }
func userKey(id string) string          { return "user/" + id }
func userEmailKey(email string) string  { return "user-email/" + strings.ToLower(email) }
func apiKeyKey(hash string) string      { return "key/" + hash }
func apiKeyIDKey(id string) string      { return "key-id/" + id }
func planKey(code string) string        { return "plan/" + code }

// setTo sets *field to v and says whether that changed it: an update's
// change that writes nothing when the row already says so.
func setTo[T comparable](field *T, v T) bool {
	changed := *field != v
	*field = v
	return changed
}

// errRowChanged: every compare-and-set of an update found the row written
// since it was read; a conflict (409), for the caller to try again.
var errRowChanged = fmt.Errorf("%w: the row kept changing while it was updated", ErrConflict)

// update reads the row at key, lets change edit it, and writes it back
// only if nobody wrote the row meanwhile: a compare-and-set on its
// version, read again and retried when another writer came first, so two
// admins changing one row at once both keep their change. change answers
// false (or an error) to write nothing; a missing row is notFound.
func update[T any](ctx context.Context, s *kvStore, key string, notFound error, change func(*T) (bool, error)) (*T, error) {
	return updateGuarded(ctx, s, key, "", notFound, change)
}

// updateGuarded is update that also bumps the counter row at guard, with
// a compare-and-set on the version read before change runs: changes to
// different rows that decide on one shared fact (a cluster keeps an
// admin) serialize on it, the later one reading the fact again.
func updateGuarded[T any](ctx context.Context, s *kvStore, key, guard string, notFound error, change func(*T) (bool, error)) (*T, error) {
	for range 8 {
		if err := s.barrier(ctx); err != nil {
			return nil, err
		}
		store := s.engine.KVStore(tenancy.SystemTenant)
		var guardOp wire.KVOp
		if guard != "" {
			g, found, err := store.KVGet(tenancy.SystemTenant, stateNS, []byte(guard))
			if err != nil {
				return nil, fmt.Errorf("%w: %w", ErrUnavailable, err)
			}
			guardOp = wire.KVOp{Op: wire.KVIncr, NS: stateNS, Key: []byte(guard), Delta: 1,
				HasExpect: true, Required: true}
			if found {
				guardOp.Expect = g.Version
			}
		}
		it, found, err := store.KVGet(tenancy.SystemTenant, stateNS, []byte(key))
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrUnavailable, err)
		}
		if !found {
			return nil, notFound
		}
		v := new(T)
		if err := json.Unmarshal(it.Value, v); err != nil {
			return nil, fmt.Errorf("proxy: row %s: %w", key, err)
		}
		write, err := change(v)
		if err != nil || !write {
			return v, err
		}
		op := putOp(key, v, false)
		op.HasExpect, op.Expect, op.Required = true, it.Version, true
		ops := []wire.KVOp{op}
		if guard != "" {
			ops = append(ops, guardOp)
		}
		ok, err := s.apply(ctx, ops...)
		if err != nil {
			return nil, err
		}
		if ok {
			return v, nil
		}
	}
	return nil, fmt.Errorf("%w: %s", errRowChanged, key)
}
