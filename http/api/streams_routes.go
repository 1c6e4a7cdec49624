package api

import "github.com/queen-mq/queen/crypto/authn"

// streamsRoutes are the Streams routes (/streams/v1/*) Queen's SDKs use for
// stateful stream processing (streams.go, streams_cycle.go).
func (s *Server) streamsRoutes() []route {
	return []route{
		{post, "/streams/v1/queries", authn.LevelReadWrite, s.streamsRegister},
		{post, "/streams/v1/state/get", authn.LevelReadOnly, s.streamsStateGet},
		{post, "/streams/v1/cycle", authn.LevelReadWrite, s.streamsCycle},
	}
}
