package broker

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/queen-mq/queen/wire"
)

// Group configs (Kafka's GROUP config resource, KIP-848 and KIP-932):
// IncrementalAlterConfigs sets them and DescribeConfigs shows them. They
// are kept in the tenant's KV store (raft-replicated), one JSON object per
// group, in a namespace HTTP clients cannot name (it starts with "_"), so
// every node reads the same configs. Only the share-group configs that
// change what a share fetch does are accepted.

// groupConfigNS is the KV namespace of group configs.
const groupConfigNS = "__kafka.group-configs"

// groupConfigDef is one group config: its default and its check.
type groupConfigDef struct {
	name, def string
	valid     func(string) bool
}

func oneOf(vs ...string) func(string) bool {
	return func(v string) bool { return slices.Contains(vs, v) }
}

func intIn(lo, hi int) func(string) bool {
	return func(v string) bool {
		n, err := strconv.Atoi(v)
		return err == nil && n >= lo && n <= hi
	}
}

// groupConfigDefs are the group configs queen accepts, with Kafka's
// defaults but share.auto.offset.reset's (docs/decisions.md).
var groupConfigDefs = []groupConfigDef{
	{"share.auto.offset.reset", "earliest", oneOf("earliest", "latest")},
	{"share.record.lock.duration.ms", strconv.Itoa(int(shareLockTimeout / time.Millisecond)), intIn(1000, 3600000)},
}

func groupConfigDefOf(name string) (groupConfigDef, bool) {
	for _, d := range groupConfigDefs {
		if d.name == name {
			return d, true
		}
	}
	return groupConfigDef{}, false
}

// groupConfigs is a group's set configs and the KV version they were
// read at (0: none set).
func (b *Broker) groupConfigs(tenant wire.ID, group string) (map[string]string, uint64, error) {
	it, found, err := b.engine.KVStore(tenant).KVGet(tenant, groupConfigNS, []byte(group))
	if err != nil || !found {
		return map[string]string{}, 0, err
	}
	set := map[string]string{}
	if err := json.Unmarshal(it.Value, &set); err != nil {
		return nil, 0, fmt.Errorf("kafka: group %s's configs: %w", group, err)
	}
	return set, it.Version, nil
}

// alterGroupConfigs applies SET and DELETE operations to a group's
// configs, compare-and-set on the version it read; a racing change is
// read again and the operations applied on top, a few times.
func (b *Broker) alterGroupConfigs(ctx context.Context, tenant wire.ID, group string, validateOnly bool,
	cfgs []kmsg.IncrementalAlterConfigsRequestResourceConfig) error {
	if group == "" || group == wire.QueueModeGroup {
		return fmt.Errorf("%w: group %q", wire.ErrBadRequest, group)
	}
	// Read what other nodes have just written: the compare-and-set below
	// would refuse a stale read, and each refusal costs an attempt.
	if err := b.catchUpKV(ctx, tenant); err != nil {
		return err
	}
	for range groupConfigAttempts {
		set, version, err := b.groupConfigs(tenant, group)
		if err != nil {
			return err
		}
		if err := applyGroupConfigOps(set, cfgs); err != nil || validateOnly {
			return err
		}
		if written, err := b.replaceKV(ctx, tenant, groupConfigNS, group, version, set, len(set) == 0); written || err != nil {
			return err
		}
	}
	return fmt.Errorf("%w: group %s's configs kept changing", context.DeadlineExceeded, group)
}

// replaceKV stores value as JSON under ns/key, or deletes the key when
// remove, if the key is still at version (what the caller read): false
// and no error when another change came first, for the caller to read
// again and retry.
func (b *Broker) replaceKV(ctx context.Context, tenant wire.ID, ns, key string, version uint64, value any, remove bool, also ...wire.KVOp) (bool, error) {
	op := wire.KVOp{Op: wire.KVPut, NS: ns, Key: []byte(key), HasExpect: true, Expect: version, Required: true}
	if remove {
		op.Op = wire.KVDelete
	} else {
		var err error
		if op.Value, err = json.Marshal(value); err != nil {
			return false, err
		}
	}
	res, err := b.engine.KV(ctx, &wire.KVCmd{Tenant: tenant, Ops: append([]wire.KVOp{op}, also...)})
	switch {
	case err != nil:
		return false, err
	case res.Code != wire.CodeOK:
		return false, res.Code.Err()
	}
	return res.OK, nil
}

// deleteGroupConfigs forgets a group's configs.
func (b *Broker) deleteGroupConfigs(ctx context.Context, tenant wire.ID, group string) error {
	res, err := b.engine.KV(ctx, &wire.KVCmd{Tenant: tenant, Ops: []wire.KVOp{{Op: wire.KVDelete, NS: groupConfigNS, Key: []byte(group)}}})
	if err == nil && res.Code != wire.CodeOK {
		err = res.Code.Err()
	}
	return err
}

// groupConfigAttempts bounds alterGroupConfigs' compare-and-set rounds.
const groupConfigAttempts = 5

// applyGroupConfigOps applies IncrementalAlterConfigs operations to set.
func applyGroupConfigOps(set map[string]string, cfgs []kmsg.IncrementalAlterConfigsRequestResourceConfig) error {
	for _, c := range cfgs {
		d, ok := groupConfigDefOf(c.Name)
		if !ok {
			return fmt.Errorf("%w: group config %s", wire.ErrUnknownConfig, c.Name)
		}
		switch c.Op {
		case kmsg.IncrementalAlterConfigOpSet:
			if c.Value == nil || !d.valid(*c.Value) {
				return fmt.Errorf("%w: %s", wire.ErrInvalidConfig, c.Name)
			}
			set[c.Name] = *c.Value
		case kmsg.IncrementalAlterConfigOpDelete:
			delete(set, c.Name)
		default:
			return fmt.Errorf("%w: %s of %s", errUnsupportedOp, c.Op, c.Name)
		}
	}
	return nil
}

// describeGroupConfigs is every group config (or those named), set or
// default.
func describeGroupConfigs(set map[string]string, names []string) []kmsg.DescribeConfigsResponseResourceConfig {
	var out []kmsg.DescribeConfigsResponseResourceConfig
	for _, d := range groupConfigDefs {
		if names != nil && !slices.Contains(names, d.name) {
			continue
		}
		e := kmsg.NewDescribeConfigsResponseResourceConfig()
		e.Name, e.Value, e.IsDefault, e.Source = d.name, kmsg.StringPtr(d.def), true, kmsg.ConfigSourceDefaultConfig
		if v, ok := set[d.name]; ok {
			e.Value, e.IsDefault, e.Source = kmsg.StringPtr(v), false, kmsg.ConfigSourceGroupConfig
		}
		out = append(out, e)
	}
	return out
}
