// Package reliability holds the reliability campaign's tests: network
// faults on real TCP between the adapters and real servers (through
// internal/testkit/faultproxy), server restarts under load, and the crash loop
// (internal/testkit/crashtest). docs/reliability.md has the table of what they
// inject and count; `make reliability` reruns them.
package reliability
