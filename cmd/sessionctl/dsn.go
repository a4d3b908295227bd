package main

import (
	"strings"

	"github.com/agentsessions/sessions/adapters"
)

func isMemory(dsn string) bool { return strings.HasPrefix(strings.ToLower(dsn), "memory:") }

// redactDSN hides a password in a store URL for output.
func redactDSN(dsn string) string { return adapters.Redact(dsn) }
