package api

// sdkRoutes are the routes Queen's SDKs and queenctl call beyond the core
// API: maintenance mode, buffer and shared-state views.
func (s *Server) sdkRoutes() []route {
	return nil
}
