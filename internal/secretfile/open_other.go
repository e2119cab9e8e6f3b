//go:build !unix

package secretfile

const openNonBlock = 0
