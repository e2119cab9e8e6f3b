package compile

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/pylon-xds/pylon/internal/config"
	"github.com/pylon-xds/pylon/internal/fleet"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// steppingClock advances by step at every reading.
func steppingClock(step time.Duration) func() time.Time {
	t := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	return func() time.Time {
		t = t.Add(step)
		return t
	}
}

// loadTests compiles f without its tests and returns the fleet and the tests.
func loadTests(t *testing.T, f config.File) (*fleet.Fleet, []config.RouteTest) {
	t.Helper()
	reg := xdstype.New()
	fleet, err := CompileSkippingTests(reg, []config.File{f}, nil)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := config.Load(reg, []config.File{f})
	if err != nil {
		t.Fatal(err)
	}
	return fleet, doc.Tests
}

// The clock is read between tests: once the budget has passed, the run
// stops and the change is refused, naming the test that was running when
// time ran out, with the budget and how far the run got. Each test "takes"
// a second here: with a 3s budget the fourth is the one that runs over.
func TestRouteTestsTimeBudget(t *testing.T) {
	fleet, tests := loadTests(t, regexHeavy(2, 10, 10, 0, false))
	problems := runRouteTests(context.Background(), fleet, tests, testBudget{3 * time.Second, steppingClock(time.Second)})
	if len(problems) != 1 {
		t.Fatalf("%d problems, want the one refusal: %v", len(problems), problems.Err())
	}
	got := problems[0].String()
	want := `heavy.yaml:` // the file and line of test t3
	if !strings.HasPrefix(got, want) || problems[0].Name != "t3" || problems[0].Line != tests[3].Line ||
		!strings.Contains(got, "time budget of 3s") || !strings.Contains(got, "test 4 of 10") {
		t.Errorf("refusal %q, want it to name test t3 (%s:%d), the 3s budget and test 4 of 10", got, tests[3].File, tests[3].Line)
	}
	// The same tests within the budget pass.
	if problems := runRouteTests(context.Background(), fleet, tests, testBudget{time.Hour, steppingClock(time.Second)}); len(problems) != 0 {
		t.Errorf("within the budget: %v", problems.Err())
	}
}

// One test that walks thousands of regex routes is stopped inside the
// walk, in real time: 50 tests on 2,000 routes whose regexes read 7 KiB
// paths take tens of seconds; with a 200ms budget the change is refused
// within a few seconds, naming the test being run.
func TestRouteTestsBudgetStopsALongTest(t *testing.T) {
	fleet, tests := loadTests(t, regexHeavy(1, 2000, 50, 7<<10, true))
	start := time.Now()
	frozen := func() time.Time { return start } // only the context can stop the run
	problems := runRouteTests(context.Background(), fleet, tests, testBudget{200 * time.Millisecond, frozen})
	took := time.Since(start)
	if len(problems) != 1 || !strings.Contains(problems[0].Message, "time budget of 200ms while running this one (test 1 of 50)") {
		t.Fatalf("problems %v, want the first test refused for the budget", problems.Err())
	}
	if took > 10*time.Second {
		t.Errorf("the run took %v, want it stopped soon after its 200ms budget", took)
	}
}

// More tests than config.MaxRouteTests are refused before any runs, even
// from a caller that did not load them with config.Load.
func TestRouteTestsCountBounded(t *testing.T) {
	fleet, tests := loadTests(t, regexHeavy(1, 1, 1, 0, false))
	many := make([]config.RouteTest, config.MaxRouteTests+1)
	for i := range many {
		many[i] = tests[0]
	}
	problems := runRouteTests(context.Background(), fleet, many, testBudget{time.Hour, time.Now})
	if len(problems) != 1 || !strings.Contains(problems[0].Message, "1001 route tests, over the limit of 1000") {
		t.Errorf("problems %v, want one refusal of the count", problems.Err())
	}
}
