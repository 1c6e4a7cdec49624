package api

import "github.com/queen-mq/queen/crypto/authn"

// sdkRoutes are the routes Queen's SDKs and queenctl call beyond the core
// API: maintenance mode, buffer and shared-state views.
func (s *Server) sdkRoutes() []route {
	return []route{
		// Maintenance mode (maintenance.go): cluster-wide, the operator's.
		{get, "/api/v1/system/maintenance", authn.LevelAdmin, s.maintenanceGet},
		{post, "/api/v1/system/maintenance", authn.LevelAdmin, s.maintenanceSet},
		{get, "/api/v1/system/maintenance/pop", authn.LevelAdmin, s.popMaintenanceGet},
		{post, "/api/v1/system/maintenance/pop", authn.LevelAdmin, s.popMaintenanceSet},
		// Raft equivalents of Queen's buffers, shared state and database
		// figures (status_extra.go).
		{get, "/api/v1/system/shared-state", authn.LevelAdmin, s.sharedState},
		{get, "/api/v1/status/buffers", authn.LevelReadOnly, s.statusBuffers},
		{get, "/api/v1/status/queues/{queue}/messages", authn.LevelReadOnly, s.statusQueueMessages},
		{get, "/api/v1/analytics/postgres-stats", authn.LevelReadOnly, s.storageStats},
	}
}
