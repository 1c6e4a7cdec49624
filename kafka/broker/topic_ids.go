package broker

import (
	"crypto/sha256"
	"encoding/binary"

	"github.com/queen-mq/queen/kafka/broker/groups"
	"github.com/queen-mq/queen/raftgroups"
	"github.com/queen-mq/queen/storage"
	"github.com/queen-mq/queen/wire"
)

// Topic ids (Metadata v10+, KIP-516). Kafka gives each topic a random
// UUID at creation and a new one when it is created again; KIP-848
// assignments name topics by id. Queen derives the id from the tenant,
// the queue's name and its queue id, which every node holds alike and a
// queue deleted and created again does not keep, so every node answers
// the same id without storing one, and a recreated topic is a new id to
// clients. Internal topics (queue id 0) get ids from their names alone.

// topicIDOf is the id of the tenant's topic name with queue id queueID.
func topicIDOf(tenant wire.ID, name string, queueID uint64) [16]byte {
	h := sha256.New()
	h.Write([]byte("queen topic id\x00"))
	h.Write(tenant[:])
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], uint64(len(name)))
	h.Write(n[:])
	h.Write([]byte(name))
	binary.BigEndian.PutUint64(n[:], queueID)
	h.Write(n[:])
	var id [16]byte
	copy(id[:], h.Sum(nil))
	// As a version 8 UUID: never the zero id, which means "no id".
	id[6] = id[6]&0x0f | 0x80
	id[8] = id[8]&0x3f | 0x80
	return id
}

// topicID is t's id.
func topicID(tenant wire.ID, t storage.Topic) [16]byte { return topicIDOf(tenant, t.Name, t.QueueID) }

// topicInfos is the tenant's topics as consumer-protocol groups subscribe
// to them (internal topics are never assigned).
func topicInfos(e *raftgroups.Engine, tenant wire.ID) []groups.TopicInfo {
	ts := e.KafkaTopics(tenant)
	out := make([]groups.TopicInfo, 0, len(ts))
	for _, t := range ts {
		if !isInternalTopic(t.Name) {
			out = append(out, groups.TopicInfo{Name: t.Name, ID: topicID(tenant, t), Partitions: int32(t.Partitions)})
		}
	}
	return out
}

// consumerTopicInfos is the tenant's topics as KIP-848 consumer groups
// resolve subscriptions against them: internal topics included, as Kafka's
// broker-side regex resolution assigns an internal topic a regex (or name)
// matches; they hold no records, and a fetch of them answers empty.
func consumerTopicInfos(e *raftgroups.Engine, tenant wire.ID) []groups.TopicInfo {
	out := topicInfos(e, tenant)
	n := int32(len(internalTopicGroups(e, tenant)))
	for _, name := range internalTopics {
		out = append(out, groups.TopicInfo{Name: name, ID: topicIDOf(tenant, name, 0), Partitions: n})
	}
	return out
}

// topicNames is the names of the tenant's topics by id, internal ones
// included (consumerTopicInfos).
func topicNames(e *raftgroups.Engine, tenant wire.ID) map[[16]byte]string {
	names := map[[16]byte]string{}
	for _, t := range consumerTopicInfos(e, tenant) {
		names[t.ID] = t.Name
	}
	return names
}

// topicByID finds the tenant's topic (internal ones included: internal
// reports one) with id, by looking at every topic.
func (b *Broker) topicByID(tenant wire.ID, id [16]byte) (t storage.Topic, internal, ok bool) {
	for _, name := range internalTopics {
		if topicIDOf(tenant, name, 0) == id {
			return storage.Topic{Name: name}, true, true
		}
	}
	for _, t := range b.engine.KafkaTopics(tenant) {
		if topicID(tenant, t) == id && !isInternalTopic(t.Name) {
			return t, false, true
		}
	}
	return storage.Topic{}, false, false
}
