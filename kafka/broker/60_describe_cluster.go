package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/queen-mq/queen/kafka"
)

// handleDescribeCluster lists the brokers as Metadata does, for admin tools
// that ask this instead.
func (b *Broker) handleDescribeCluster(ctx context.Context, c *kafka.Conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DescribeClusterRequest)
	resp := req.ResponseKind().(*kmsg.DescribeClusterResponse)
	resp.ClusterID, resp.ControllerID, resp.EndpointType = clusterID, b.controllerID(), 1
	for _, br := range b.brokers() {
		resp.Brokers = append(resp.Brokers, kmsg.DescribeClusterResponseBroker{NodeID: br.NodeID, Host: br.Host, Port: br.Port})
	}
	return resp, nil
}
