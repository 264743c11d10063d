module github.com/decisionledger/ledger

go 1.26.0

require (
	github.com/gowebpki/jcs v1.0.2
	golang.org/x/text v0.44.0
)

require pgregory.net/rapid v1.3.0
