package api

// streamsRoutes are the Streams routes (/streams/v1/*) Queen's SDKs use for
// stateful stream processing.
func (s *Server) streamsRoutes() []route {
	return nil
}
