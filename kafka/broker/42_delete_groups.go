package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/queen-mq/queen/kafka"
	"github.com/queen-mq/queen/wire"
)

// DeleteGroups (key 42), v0-2: deletes the Queen group with all its
// positions and subscriptions (spec §3.2), the same command as the HTTP
// DELETE /api/v1/consumer-groups/:group?deleteMetadata=true. A group with
// live members (share consumers included) is refused with NON_EMPTY_GROUP;
// one that exists nowhere with GROUP_ID_NOT_FOUND. The group's configs
// (group_configs.go) go with it; a group that has only configs exists.
func (b *Broker) handleDeleteGroups(ctx context.Context, c *kafka.Conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DeleteGroupsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteGroupsResponse)
	for _, name := range req.Groups {
		rg := kmsg.NewDeleteGroupsResponseGroup()
		rg.Group = name
		rg.ErrorCode = b.deleteGroup(ctx, c, name)
		resp.Groups = append(resp.Groups, rg)
	}
	return resp, nil
}

func (b *Broker) deleteGroup(ctx context.Context, c *kafka.Conn, name string) int16 {
	if name == "" {
		return kerr.InvalidGroupID.Code
	}
	tenant, coord, kErr := b.groupCoordinator(c, name)
	configs := false
	if kErr == nil {
		kErr = b.catchUpStoredGroups(ctx, tenant)
	}
	if kErr == nil {
		_, version, err := b.groupConfigs(tenant, name)
		configs = err == nil && version > 0
		if v, ok := b.shares.describe(shareGroupKey{tenant, name}); ok && len(v.members) > 0 {
			kErr = kerr.NonEmptyGroup
		} else if _, inMemory := coord.Describe(name); !inMemory && !b.engine.HasGroup(tenant, name) {
			if !configs {
				kErr = kerr.GroupIDNotFound
			}
		} else {
			kErr = coord.Delete(name)
		}
	}
	if kErr != nil {
		return kErr.Code
	}
	if configs {
		if err := b.deleteGroupConfigs(ctx, tenant, name); err != nil {
			c.Logger().Warn("kafka group configs not deleted", "group", name, "err", err)
			return coordinatorCode(err)
		}
		if !b.engine.HasGroup(tenant, name) {
			return 0
		}
	}
	res, err := b.engine.DeleteGroup(ctx, &wire.DeleteGroupCmd{Tenant: tenant, Group: name, DeleteMetadata: true})
	if err != nil {
		c.Logger().Warn("kafka group not deleted", "group", name, "err", err)
		return coordinatorCode(err)
	}
	return coordinatorCode(res.Code.Err())
}
