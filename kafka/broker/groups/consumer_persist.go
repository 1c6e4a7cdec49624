package groups

import (
	"bytes"
	"errors"
	"regexp"
	"time"

	"github.com/queen-mq/queen/wire"
)

// Consumer-protocol memberships are recorded as classic ones are
// (persist.go), through Config.Persist with the group epoch as the
// generation, after every heartbeat that changed them: a coordinator
// built after a leadership change continues the group with its members,
// epochs, targets and who holds which partition, so members go on
// heartbeating at their epochs and no partition is handed to a second
// member while the first may still hold it. The encoding starts with its
// own version byte, so one record of a group id decodes as whichever kind
// the group was last.

const consumerStateVersion = 0x81

func encodeConsumer(cg *cgroup) []byte {
	w := wire.Writer{}
	w.U8(consumerStateVersion)
	w.Varint(int64(cg.epoch))
	w.Varint(int64(cg.assignEpoch))
	w.String(cg.assignor)
	w.String(cg.topics)
	ids := sortedMemberIDs(cg)
	w.Uvarint(uint64(len(ids)))
	for _, id := range ids {
		m := cg.members[id]
		for _, s := range []string{m.id, m.instanceID, m.clientID, m.clientHost, m.rackID, m.regexSrc, m.assignor} {
			w.String(s)
		}
		w.Varint(int64(m.epoch))
		w.Varint(int64(m.prevEpoch))
		w.Varint(m.rebalanceTimeout.Milliseconds())
		w.Uvarint(uint64(len(m.subscribed)))
		for _, s := range m.subscribed {
			w.String(s)
		}
		target := make(map[tp]int32, len(m.target))
		for p := range m.target {
			target[p] = 0
		}
		for _, set := range []map[tp]int32{target, m.assigned, m.revoking} {
			ps := make([]tp, 0, len(set))
			for p := range set {
				ps = append(ps, p)
			}
			w.Uvarint(uint64(len(ps)))
			for _, p := range sortTPs(ps) {
				w.Fixed(p.topic[:])
				w.Varint(int64(p.part))
				w.Varint(int64(set[p]))
			}
		}
	}
	return w.B
}

func decodeConsumer(name string, b []byte) (*cgroup, error) {
	r := wire.NewReader(b)
	if r.U8() != consumerStateVersion {
		return nil, errors.New("groups: unknown consumer group encoding")
	}
	cg := &cgroup{name: name, members: map[string]*cmember{}, static: map[string]string{}, holder: map[tp]string{}}
	cg.epoch, cg.assignEpoch = int32(r.Varint()), int32(r.Varint())
	cg.assignor, cg.topics = r.String(), r.String()
	for range r.Count(1<<20, 1) {
		m := &cmember{target: map[tp]bool{}, assigned: map[tp]int32{}, revoking: map[tp]int32{}}
		for _, s := range []*string{&m.id, &m.instanceID, &m.clientID, &m.clientHost, &m.rackID, &m.regexSrc, &m.assignor} {
			*s = r.String()
		}
		m.epoch, m.prevEpoch = int32(r.Varint()), int32(r.Varint())
		m.rebalanceTimeout = time.Duration(r.Varint()) * time.Millisecond
		for range r.Count(1<<20, 1) {
			m.subscribed = append(m.subscribed, r.String())
		}
		if m.regexSrc != "" {
			re, err := regexp.Compile("^(?:" + m.regexSrc + ")$")
			if err != nil {
				return nil, err
			}
			m.regex = re
		}
		sets := []map[tp]int32{{}, m.assigned, m.revoking}
		for _, set := range sets {
			for range r.Count(1<<24, 18) {
				var p tp
				copy(p.topic[:], r.Fixed(16))
				p.part = int32(r.Varint())
				set[p] = int32(r.Varint())
			}
		}
		for p := range sets[0] {
			m.target[p] = true
		}
		for _, held := range sets[1:] {
			for p := range held {
				cg.holder[p] = m.id
			}
		}
		cg.members[m.id] = m
		if m.instanceID != "" {
			cg.static[m.instanceID] = m.id
		}
	}
	if err := r.Done(); err != nil {
		return nil, err
	}
	return cg, nil
}

// persistConsumer hands cg's membership to Config.Persist when it changed
// since last handed (nil once the group is gone). The caller holds c.mu.
func (c *Coordinator) persistConsumer(cg *cgroup) {
	if c.cfg.Persist == nil {
		return
	}
	var state []byte
	if c.consumers[cg.name] == cg {
		state = encodeConsumer(cg)
	}
	if state != nil && bytes.Equal(state, cg.recorded) {
		return
	}
	cg.recorded = state
	c.cfg.Persist(cg.name, cg.epoch, state)
}

// restoreConsumer installs a recorded consumer group, every member's
// session started afresh. The caller holds c.mu.
func (c *Coordinator) restoreConsumer(name string, state []byte) error {
	cg, err := decodeConsumer(name, state)
	if err != nil {
		return err
	}
	cg.recorded = state
	c.consumers[name] = cg
	for _, m := range cg.members {
		c.armConsumerSession(cg, m)
	}
	return nil
}
