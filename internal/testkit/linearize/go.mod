module github.com/agentsessions/sessions/internal/testkit/linearize

go 1.26.0

require (
	github.com/agentsessions/sessions v0.0.0
	github.com/anishathalye/porcupine v1.3.1
	golang.org/x/sys v0.50.0
)

replace github.com/agentsessions/sessions => ../../..
