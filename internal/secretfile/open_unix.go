//go:build unix

package secretfile

import "syscall"

// openNonBlock keeps open(2) of a FIFO from waiting for a writer.
const openNonBlock = syscall.O_NONBLOCK
