// Package all registers every backend of package adapters, for programs
// (such as sessionctl) that open any store URL:
//
//	import _ "github.com/agentsessions/sessions/adapters/all"
//
// A program that needs one backend imports that backend's package instead,
// and links only it.
package all

import (
	_ "github.com/agentsessions/sessions/adapters/memory"
	_ "github.com/agentsessions/sessions/adapters/mongo"
	_ "github.com/agentsessions/sessions/adapters/postgres"
	_ "github.com/agentsessions/sessions/adapters/redis"
	_ "github.com/agentsessions/sessions/adapters/sqlite"
)
