package proxy

// consolePrincipalPrefix starts a console user's ACL principal. Its own
// name space beside apikey: (acl.PrincipalForAPIKey), so a grant to a
// person never reads as one to a key.
const consolePrincipalPrefix = "User:console:"

// ConsolePrincipal is the ACL principal a console session acts as on the
// data plane: its user, by id. The id, not the e-mail (which the control
// plane can give to someone else) nor the account (whose people would
// then share every grant), and the same for an operator's session, which
// is a user too; never User:ANONYMOUS, which is what a request without a
// login is, so a binding for anonymous gives a session nothing.
func ConsolePrincipal(userID string) string { return consolePrincipalPrefix + userID }
