package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/queen-mq/queen/kafka"
)

// handleACLs answers DescribeAcls, CreateAcls and DeleteAcls alike with
// SECURITY_DISABLED: queen has no Kafka ACLs; access is SASL/PLAIN
// authentication (spec §3.4).
func (b *Broker) handleACLs(ctx context.Context, c *kafka.Conn, kreq kmsg.Request) (kmsg.Response, error) {
	return kafka.ErrorResponse(kreq, kerr.SecurityDisabled.Code), nil
}
