package e2etest

import (
	"testing"

	"github.com/golang-jwt/jwt/v5"
)

// JWTSecret is the HS256 secret the nodes of the token tests verify
// broker JWTs with.
const JWTSecret = "e2e-secret-that-is-long-enough-for-hs256"

// HS256Token is a JWT of claims signed with JWTSecret.
func HS256Token(t *testing.T, claims jwt.MapClaims) string {
	t.Helper()
	s, err := jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString([]byte(JWTSecret))
	if err != nil {
		t.Fatal(err)
	}
	return s
}
