package netlab

import (
	"os"
	"os/signal"
	"sync"
	"syscall"
)

// openLabs holds the labs of this program not closed yet, for
// CloseAllOnSignal.
var (
	openMu     sync.Mutex
	openLabs   = map[*Lab]bool{}
	signalOnce sync.Once
)

func registerOpen(l *Lab) {
	openMu.Lock()
	defer openMu.Unlock()
	openLabs[l] = true
}

func unregisterOpen(l *Lab) {
	openMu.Lock()
	defer openMu.Unlock()
	delete(openLabs, l)
}

// CloseAllOnSignal makes SIGINT and SIGTERM close every open lab of this
// program before the signal takes its default effect and ends the program.
// Calls after the first do nothing.
func CloseAllOnSignal() {
	signalOnce.Do(func() {
		signals := make(chan os.Signal, 1)
		signal.Notify(signals, os.Interrupt, syscall.SIGTERM)
		go func() {
			sig := <-signals
			openMu.Lock()
			labs := make([]*Lab, 0, len(openLabs))
			for l := range openLabs {
				labs = append(labs, l)
			}
			openMu.Unlock()
			var wg sync.WaitGroup
			for _, l := range labs {
				wg.Add(1)
				go func() {
					defer wg.Done()
					l.Close()
				}()
			}
			wg.Wait()
			signal.Reset(os.Interrupt, syscall.SIGTERM)
			syscall.Kill(os.Getpid(), sig.(syscall.Signal))
		}()
	})
}
