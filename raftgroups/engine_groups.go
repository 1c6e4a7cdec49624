package raftgroups

import (
	"context"

	"github.com/queen-mq/queen/wire"
)

// Engine methods for Kafka consumer groups (who coordinates them is
// Engine.Leader).

// DeleteOffsets forgets a group's positions in the named partitions.
func (e *Engine) DeleteOffsets(ctx context.Context, c *wire.DeleteOffsetsCmd) (wire.CodesResult, error) {
	return proposeOne(ctx, e, c.Tenant, wire.KindDeleteOffsets, c.Encode(nil), wire.DecodeCodesResult)
}
