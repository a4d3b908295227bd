package runstate

// Test-only switches for the Run's test hooks (run.go), for the property
// test's negative controls in runprop_test.go.

// RunBreak names one of the Run's test hooks.
type RunBreak int

// The Run's test hooks.
const (
	BreakInterruptCheck RunBreak = iota // Interrupt does not check its awaited ids
	BreakClaimWrite                     // Claim does not write its claim
	BreakSettleNothing                  // Settle with items appends them when nothing is open
)

// BreakRun switches hook b on until the returned function is called.
func BreakRun(b RunBreak) (restore func()) {
	hook := map[RunBreak]*bool{
		BreakInterruptCheck: &brokenInterrupt,
		BreakClaimWrite:     &brokenClaim,
		BreakSettleNothing:  &brokenSettle,
	}[b]
	*hook = true
	return func() { *hook = false }
}
