package raftgroups

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/queen-mq/queen/tenancy/acl"
	"github.com/queen-mq/queen/wire"
)

// ACLStore is the replicated acl.Store: every tenant's ACL bindings live in
// the default tenant's KV group (as the Kafka facade's SCRAM users and
// client quotas do: KV commands every node already applies, so no new
// entry kind and no format gate), in a namespace HTTP clients cannot name
// (KV namespaces start with [a-z0-9]). One key per binding,
// "<tenant>/<hash of the binding>", so adding is idempotent and removing
// needs no read; beside them one counter, the generation, bumped in the
// same command as every change, which a node reads once a second to learn
// whether it must reload.
type ACLStore struct{ e *Engine }

// ACLStore is the engine's replicated ACL store.
func (e *Engine) ACLStore() *ACLStore { return &ACLStore{e: e} }

// aclNS is the KV namespace of ACL bindings.
const aclNS = "__acls"

// aclGenKey is the generation counter's key: '~' sorts after every tenant
// id, and no binding key lacks a '/'.
const aclGenKey = "~gen"

// aclBatch bounds the bindings of one KV command (wire.MaxKVOpsPerCall
// operations with the generation's).
const aclBatch = wire.MaxKVOpsPerCall - 1

type storedBinding struct {
	Tenant  string      `json:"tenant"`
	Binding acl.Binding `json:"binding"`
}

func aclKey(tenant string, b acl.Binding) (string, []byte, error) {
	v, err := json.Marshal(storedBinding{Tenant: tenant, Binding: b})
	if err != nil {
		return "", nil, err
	}
	// The hash of the binding alone (the tenant prefixes the key), so
	// the key is bounded whatever the binding's strings.
	bj, _ := json.Marshal(b)
	sum := sha256.Sum256(bj)
	return tenant + "/" + hex.EncodeToString(sum[:16]), v, nil
}

func (s *ACLStore) barrier(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, CatchUpWait)
	defer cancel()
	return s.e.Barrier(ctx, s.e.KVGroup(wire.DefaultTenant))
}

// Generation implements acl.Store: the counter on this node's replica
// caught up with the KV group's leader (0 before any change).
func (s *ACLStore) Generation(ctx context.Context) (uint64, error) {
	if err := s.barrier(ctx); err != nil {
		return 0, err
	}
	return s.generation()
}

func (s *ACLStore) generation() (uint64, error) { return s.gen().Local() }

// gen is the bindings' generation counter.
func (s *ACLStore) gen() KVGeneration { return s.e.KVGeneration(aclNS, aclGenKey) }

// Load implements acl.Store. The generation is read before the bindings:
// a change landing between them leaves the generation behind, and the
// next refresh loads again.
func (s *ACLStore) Load(ctx context.Context) (uint64, map[string][]acl.Binding, error) {
	if err := s.barrier(ctx); err != nil {
		return 0, nil, err
	}
	gen, err := s.generation()
	if err != nil {
		return 0, nil, err
	}
	all := map[string][]acl.Binding{}
	err = s.e.KVStore(wire.DefaultTenant).KVEach(wire.DefaultTenant, aclNS, nil, func(it wire.KVItem) error {
		if string(it.Key) == aclGenKey {
			return nil
		}
		var sb storedBinding
		if json.Unmarshal(it.Value, &sb) == nil && strings.HasPrefix(string(it.Key), sb.Tenant+"/") {
			all[sb.Tenant] = append(all[sb.Tenant], sb.Binding)
		}
		return nil
	})
	if err != nil {
		return 0, nil, err
	}
	return gen, all, nil
}

// Change implements acl.Store: puts and deletes in commands of at most
// aclBatch bindings, each bumping the generation, each answered once
// raft commits it.
func (s *ACLStore) Change(ctx context.Context, tenant string, add, remove []acl.Binding) error {
	var ops []wire.KVOp
	flush := func() error {
		if len(ops) == 0 {
			return nil
		}
		ops = append(ops, s.gen().Bump())
		res, err := s.e.KV(ctx, &wire.KVCmd{Tenant: wire.DefaultTenant, Ops: ops})
		ops = ops[:0]
		switch {
		case err != nil:
			return err
		case res.Code != wire.CodeOK:
			return res.Code.Err()
		case !res.OK:
			return fmt.Errorf("acl: storing bindings: operation %d not applied", res.FailedIndex)
		}
		return nil
	}
	for i, list := range [][]acl.Binding{add, remove} {
		for _, b := range list {
			key, value, err := aclKey(tenant, b)
			if err != nil {
				return err
			}
			op := wire.KVOp{Op: wire.KVPut, NS: aclNS, Key: []byte(key), Value: value}
			if i == 1 {
				op = wire.KVOp{Op: wire.KVDelete, NS: aclNS, Key: []byte(key)}
			}
			ops = append(ops, op)
			if len(ops) == aclBatch {
				if err := flush(); err != nil {
					return err
				}
			}
		}
	}
	return flush()
}

var _ acl.Store = (*ACLStore)(nil)
