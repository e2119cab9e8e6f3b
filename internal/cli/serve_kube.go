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
	f.StringVar(&o.Kube.Selector, "kube-selector", "", "watch only the Services and EndpointSlices matching this label selector, e.g. 'pylon.dev/expose=true'")
}
