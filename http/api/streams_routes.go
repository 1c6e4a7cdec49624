package api

import "github.com/queen-mq/queen/crypto/authn"

// streamsRoutes are the Streams routes (/streams/v1/*) Queen's SDKs use for
// stateful stream processing (streams.go, streams_cycle.go; the listing for the dashboard,
// streams_list.go).
func (s *Server) streamsRoutes() []route {
	return []route{
		{get, "/streams/v1/queries", authn.LevelReadOnly, s.streamsList},
		{post, "/streams/v1/queries", authn.LevelReadWrite, s.streamsRegister},
		{post, "/streams/v1/state/get", authn.LevelReadOnly, s.streamsStateGet},
		{post, "/streams/v1/cycle", authn.LevelReadWrite, s.streamsCycle},
	}
}
