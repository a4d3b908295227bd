package contract

import (
	"github.com/stretchr/testify/require"

	"github.com/agentsessions/sessions/conformance/suite"
	"github.com/agentsessions/sessions/session"
)

func clauseDeclaredImplemented(c *suite.C) {
	probed := session.Probe(c.Fresh("caps"))
	for _, cap := range c.Harness().Declared().List() {
		require.True(c, probed.Has(cap), "capability %s is declared but not implemented (probed: %s)", cap, probed)
	}
}

func clauseImplementedDeclared(c *suite.C) {
	probed := session.Probe(c.Fresh("caps"))
	for _, cap := range probed.List() {
		require.True(c, c.Harness().Declared().Has(cap), "capability %s is implemented but not declared (declared: %s)", cap, c.Harness().Declared())
	}
}
