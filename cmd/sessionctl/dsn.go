package main

import (
	"net/url"
	"strings"
)

func isMemory(dsn string) bool { return strings.HasPrefix(strings.ToLower(dsn), "memory:") }

// redactDSN hides a password in a store URL for output.
func redactDSN(dsn string) string {
	u, err := url.Parse(dsn)
	if err != nil {
		return "(unparsable URL)"
	}
	return u.Redacted()
}
