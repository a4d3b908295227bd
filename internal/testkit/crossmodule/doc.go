// Package crossmodule holds the tests that need two of the repository's
// nested modules at once: an integration (integrations/openaigo) over the
// otelsession wrapper. They live in this test-only module so that neither
// of those modules requires the other: a nested module's go.mod holds only
// what its users need, and a user of integrations/openaigo never has to
// resolve otelsession. The package has no code of its own.
package crossmodule
