package kafka

import (
	"context"
	"regexp"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ApiVersions (key 18), v0-3. It advertises only the keys that have a
// handler, each with its window from the version table. Requests above v3
// never reach here: the connection answers them with the v0 layout and
// UNSUPPORTED_VERSION (see unsupportedVersionFrame).

// softwareNamePattern is what Kafka accepts as client_software_name and
// client_software_version (KIP-511).
var softwareNamePattern = regexp.MustCompile(`^[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?$`)

func handleApiVersions(_ context.Context, c *Conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.ApiVersionsRequest)
	resp := req.ResponseKind().(*kmsg.ApiVersionsResponse)
	if req.Version >= 3 && (!softwareNamePattern.MatchString(req.ClientSoftwareName) ||
		!softwareNamePattern.MatchString(req.ClientSoftwareVersion)) {
		resp.ErrorCode = kerr.InvalidRequest.Code
		c.log.Debug("kafka ApiVersions with an invalid client software name",
			"name", req.ClientSoftwareName, "version", req.ClientSoftwareVersion)
		return resp, nil
	}
	resp.ApiKeys = c.srv.advertised // shared and never modified
	return resp, nil
}
