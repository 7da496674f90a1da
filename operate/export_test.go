package operate

// WithSlowReads is c with every read within the budget waiting past it first: the fault seam
// of TestOverviewWithinBudget.
func WithSlowReads(c OverviewConfig) OverviewConfig {
	c.slowReads = true
	return c
}
