package load

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fakePool is a pool of n placeholder connections for App.run: what the tests below check
// needs no database.
func fakePool(n int) chan *appConn {
	pool := make(chan *appConn, n)
	for range n {
		pool <- &appConn{}
	}
	return pool
}

// Each request is dispatched no earlier than its due time (start + i/rate in its phase, the
// next phase beginning where the previous one ends), takes the next id of the shared counter,
// and has its tsreg from the clock it read plus the offset, to the microsecond.
func TestAppKeepsToTheSchedule(t *testing.T) {
	a := App{ClockOffset: -1500 * time.Millisecond, Seed: 3}.withDefaults()
	var ids atomic.Int64
	ids.Store(100)
	start := time.Now().Add(20 * time.Millisecond)
	phases := []Phase{{Rate: 200, For: 300 * time.Millisecond}, {Rate: 50, For: 200 * time.Millisecond}}
	got, err := a.run(context.Background(), &ids, start, phases, fakePool(4), func(context.Context, *appConn, *Registration) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Registrations) != 70 || got.Dropped != 0 {
		t.Fatalf("%d registered, %d dropped: want 60 + 10 and none dropped", len(got.Registrations), got.Dropped)
	}
	for i, r := range got.Registrations {
		if r.ID != int64(101+i) {
			t.Fatalf("registration %d has id %d, want %d", i, r.ID, 101+i)
		}
		due := start.Add(time.Duration(i) * 5 * time.Millisecond)
		if i >= 60 {
			due = start.Add(300*time.Millisecond + time.Duration(i-60)*20*time.Millisecond)
		}
		if r.Read.Before(due) {
			t.Fatalf("registration %d read the clock at %v, before it was due (%v)", i, r.Read.Sub(start), due.Sub(start))
		}
		if want := r.Read.Add(a.ClockOffset).Truncate(time.Microsecond); !r.Tsreg.Equal(want) || r.Tsreg.Nanosecond()%1000 != 0 {
			t.Fatalf("registration %d: tsreg %v, want %v (the clock plus the offset, to the microsecond)", i, r.Tsreg, want)
		}
		if r.Soort != "VERHUIZING" || r.Committed.Before(r.Read) {
			t.Fatalf("registration %+v", r)
		}
	}
	if ids.Load() != 170 {
		t.Fatalf("counter at %d, want 170", ids.Load())
	}
}

// A request that waits longer than Timeout for a connection, counted from when it read the
// clock, is dropped; the others got their connection within Timeout.
func TestAppDropsAfterTimeout(t *testing.T) {
	const timeout = 100 * time.Millisecond
	a := App{Timeout: timeout}.withDefaults()
	var ids atomic.Int64
	var late atomic.Int64
	got, err := a.run(context.Background(), &ids, time.Time{}, []Phase{{Rate: 100, For: 500 * time.Millisecond}}, fakePool(1),
		func(_ context.Context, _ *appConn, r *Registration) error {
			if time.Since(r.Read) > timeout {
				late.Add(1)
			}
			time.Sleep(60 * time.Millisecond) // one connection, a registration every 10 ms: most wait too long
			return nil
		})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Registrations)+got.Dropped != 50 || got.Dropped == 0 || len(got.DroppedAt) != got.Dropped || len(got.Registrations) < 5 {
		t.Fatalf("%d registered, %d dropped (%d times): want 50 in all, some of each", len(got.Registrations), got.Dropped, len(got.DroppedAt))
	}
	if late.Load() > 0 {
		t.Fatalf("%d registrations got their connection after the timeout", late.Load())
	}
	// Without a timeout nothing is dropped: requests wait.
	a.Timeout = 0
	got, err = a.run(context.Background(), &ids, time.Time{}, []Phase{{Rate: 200, For: 100 * time.Millisecond}}, fakePool(1),
		func(context.Context, *appConn, *Registration) error { time.Sleep(10 * time.Millisecond); return nil })
	if err != nil || got.Dropped != 0 || len(got.Registrations) != 20 {
		t.Fatalf("without a timeout: %d registered, %d dropped, %v", len(got.Registrations), got.Dropped, err)
	}
}

// A slow registration holds only its own connection: the requests after it keep to the
// schedule and commit before it.
func TestAppSlowRegistrationDoesNotDelayTheNext(t *testing.T) {
	a := App{Pool: 4}.withDefaults()
	var ids atomic.Int64
	got, err := a.run(context.Background(), &ids, time.Time{}, []Phase{{Rate: 100, For: 200 * time.Millisecond}}, fakePool(4),
		func(_ context.Context, _ *appConn, r *Registration) error {
			if r.ID == 1 {
				time.Sleep(400 * time.Millisecond)
			}
			return nil
		})
	if err != nil || len(got.Registrations) != 20 {
		t.Fatalf("%d registered, %v", len(got.Registrations), err)
	}
	first := got.Registrations[0]
	for _, r := range got.Registrations[1:] {
		if !r.Committed.Before(first.Committed) {
			t.Fatalf("registration %d committed %v after the first read the clock, after the slow first one (%v)",
				r.ID, r.Committed.Sub(first.Read), first.Committed.Sub(first.Read))
		}
	}
}

// Apps that share a counter never share an id, even running at once.
func TestAppsShareTheCounter(t *testing.T) {
	var ids atomic.Int64
	var wg sync.WaitGroup
	results := make([]Registered, 3)
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a := App{Seed: uint64(i)}.withDefaults()
			var err error
			results[i], err = a.run(context.Background(), &ids, time.Time{}, []Phase{{Rate: 500, For: 200 * time.Millisecond}}, fakePool(16),
				func(context.Context, *appConn, *Registration) error { return nil })
			if err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	seen := map[int64]bool{}
	for _, r := range results {
		for _, reg := range r.Registrations {
			if seen[reg.ID] {
				t.Fatalf("id %d registered twice", reg.ID)
			}
			seen[reg.ID] = true
		}
	}
	if len(seen) != 300 {
		t.Fatalf("%d ids, want 300", len(seen))
	}
}

// A handeling has one person of 1..Personen, one in ten two distinct ones, sorted; the same
// seed draws the same persons.
func TestAppPersons(t *testing.T) {
	a := App{Personen: 50, Seed: 9}.withDefaults()
	var ids atomic.Int64
	run := func() Registered {
		got, err := a.run(context.Background(), &ids, time.Time{}, []Phase{{Rate: 1e6, For: 10 * time.Millisecond}}, fakePool(16),
			func(context.Context, *appConn, *Registration) error { return nil })
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	got := run()
	two := 0
	for _, r := range got.Registrations {
		for _, p := range r.Personen {
			if p < 1 || p > 50 {
				t.Fatalf("person %d out of 1..50", p)
			}
		}
		switch len(r.Personen) {
		case 1:
		case 2:
			two++
			if r.Personen[0] >= r.Personen[1] {
				t.Fatalf("persons %v not distinct and sorted", r.Personen)
			}
		default:
			t.Fatalf("%d persons", len(r.Personen))
		}
	}
	if n := len(got.Registrations); n != 10_000 || two < n/10-300 || two > n/10+300 {
		t.Fatalf("%d of %d handelingen with two persons, want about a tenth", two, n)
	}
	again := run()
	for i := range got.Registrations {
		if x, y := got.Registrations[i].Personen, again.Registrations[i].Personen; len(x) != len(y) || x[0] != y[0] {
			t.Fatalf("the same seed drew %v and then %v", x, y)
		}
	}
}

// When ctx ends the schedule stops and Register says so.
func TestAppStopsWithContext(t *testing.T) {
	a := App{}.withDefaults()
	var ids atomic.Int64
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	began := time.Now()
	got, err := a.run(ctx, &ids, time.Time{}, []Phase{{Rate: 10, For: time.Hour}}, fakePool(1),
		func(context.Context, *appConn, *Registration) error { return nil })
	if err == nil || time.Since(began) > 5*time.Second || len(got.Registrations) == 0 || len(got.Registrations) > 3 {
		t.Fatalf("after the context ended: %d registered, %v, after %v", len(got.Registrations), err, time.Since(began))
	}
}
