package fault

import "context"

// Hook is a fault seam in a library's Hooks: tests set one to fail or kill at a precise step
// with the ids at hand. A nil Hook does nothing, which is what production runs.
type Hook func(ctx context.Context, ids []int64) error

// Run runs h, if set.
func (h Hook) Run(ctx context.Context, ids []int64) error {
	if h == nil {
		return nil
	}
	return h(ctx, ids)
}
