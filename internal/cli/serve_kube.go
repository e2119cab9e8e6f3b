package cli

import (
	"github.com/spf13/cobra"

	"github.com/pylon-xds/pylon/internal/daemon"
)

// addKubeFlags are the Kubernetes source's flags (docs/sources.md).
func addKubeFlags(cmd *cobra.Command, o *daemon.Options) {
	f := cmd.Flags()
	f.StringVar(&o.Kube.Kubeconfig, "kubeconfig", "", "also serve a Kubernetes cluster's Services and EndpointSlices (read-only) as services NAMESPACE/NAME:PORT, reached with this kubeconfig; they join the config of either mode")
	f.BoolVar(&o.Kube.InCluster, "kube-in-cluster", false, "as --kubeconfig, with the pod's service account (running in the cluster)")
	f.StringArrayVar(&o.Kube.Clusters, "kube-cluster", nil, "also serve this named cluster, NAME=KUBECONFIG (repeatable; NAME a DNS label of at most 32 characters): its endpoints' locality region is NAME; with --kubeconfig too, that one is the unnamed cluster")
	f.StringVar(&o.Kube.Merge, "kube-merge", "locality", "a service several clusters define: locality (one service, each named cluster's endpoints in region NAME) or separate (named clusters' services are NAME/NAMESPACE/NAME:PORT)")
	f.StringSliceVar(&o.Kube.Namespaces, "kube-namespaces", nil, "watch only these namespaces (comma-separated or repeated; default: all)")
	f.StringVar(&o.Kube.Selector, "kube-selector", "", "watch only the Services and EndpointSlices matching this label selector, e.g. 'pylon.dev/expose=true' (a filter, not a trust boundary: whoever writes a Service sets its labels)")
	f.StringSliceVar(&o.Kube.DenyCIDRs, "kube-deny-cidrs", daemon.DefaultKubeDenyCIDRs(), "never serve an endpoint address in these CIDRs (default: the cloud metadata services'; empty denies none of them; loopback, link-local and multicast are never served)")
	f.StringSliceVar(&o.Kube.AllowCIDRs, "kube-allow-cidrs", nil, "serve only endpoint addresses in these CIDRs, e.g. the pod network's (default: any not denied)")
	f.BoolVar(&o.Kube.ForeignSlices, "kube-foreign-slices", false, "also serve EndpointSlices not made by Kubernetes' EndpointSlice controller (custom controllers, slices written by hand, mirrored Endpoints)")
	f.BoolVar(&o.Kube.NodeLocalities, "kube-node-localities", false, "also read each Node's topology.kubernetes.io/region and zone labels (metadata only) as its endpoints' locality; needs get, list and watch on nodes (deploy/kubernetes/pylon-kube-nodes-rbac.yaml)")
}
