package nodegroup

import "testing"

func TestResolve(t *testing.T) {
	gs := Groups{
		{Name: "edge", Match: Match{ID: "edge-*"}},
		{Name: "payments", Match: Match{Cluster: "payments", Metadata: map[string]string{"tier": "prod"}}},
		{Name: "eu", Match: Match{Region: "eu-west-1", Zone: "a"}},
		{Name: "rest", Default: true},
	}
	for _, c := range []struct {
		node Node
		want string
	}{
		{Node{ID: "edge-7"}, "edge"},
		{Node{ID: "edgy"}, "rest"},
		{Node{ID: "p1", Cluster: "payments", Metadata: map[string]string{"tier": "prod"}}, "payments"},
		{Node{ID: "p2", Cluster: "payments", Metadata: map[string]string{"tier": "dev"}}, "rest"},
		{Node{ID: "p3", Cluster: "payments"}, "rest"},
		{Node{ID: "e1", Region: "eu-west-1", Zone: "a"}, "eu"},
		{Node{ID: "e2", Region: "eu-west-1", Zone: "b"}, "rest"},
		// First match wins, whatever follows.
		{Node{ID: "edge-1", Cluster: "payments", Metadata: map[string]string{"tier": "prod"}}, "edge"},
	} {
		i := gs.Resolve(c.node)
		if i < 0 || gs[i].Name != c.want {
			t.Errorf("%+v: got group %d, want %s", c.node, i, c.want)
		}
	}
	if i := gs[:3].Resolve(Node{ID: "nobody"}); i != -1 {
		t.Errorf("no default: got %d, want -1", i)
	}
}
