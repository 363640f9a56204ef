// Every `///` code example of Sources/LMDB, compiled (DocumentationTests checks that each one
// is here, verbatim).

import LMDB

// Concurrency.swift
func exampleAttachmentKey(_ environment: Environment) {
    final class Counter: Sendable {}
    let counterKey = AttachmentKey<Counter>("com.example.counter")
    let counter = environment.attachment(counterKey) { Counter() }
    _ = counter
}

// Environment.swift
func exampleEnvironment() throws {
    var config = EnvironmentConfiguration()
    config.databases = ["items": []]
    let env = try Environment.open(directory: "/path/to/dir", configuration: config)
    let items = try env.database("items")
    try env.write { txn in try txn.put(items, key: [1], value: Array("one".utf8)) }
    let value = try env.read { txn in try txn.get(items, key: [1]) }
    _ = value
}

func exampleMakeDurable(_ environment: Environment, db: Database) throws {
    let value = try environment.read { txn in try txn.get(db, key: Array("greeting".utf8)) }
    try environment.makeDurable(.durable)   // now tell the server about `value`
    _ = value
}

func exampleSuspendAll() {
    let stillOpen = Environment.suspendAll(waitingMilliseconds: 2000)
    // … the process may now be suspended …
    Environment.resumeAll()
    _ = stillOpen
}

// LMDBError.swift
func exampleKeyExists(_ environment: Environment, db: Database, k: [UInt8], v: [UInt8]) throws {
    do {
        try environment.write { txn in try txn.put(db, key: k, value: v, flags: .noOverwrite) }
    } catch LMDBError.keyExists {
        // already there
    }
}

// PageWalker.swift
func examplePageWalk(_ env: Environment) throws {
    let report = try env.walkPages()
    for problem in report.problems { print(problem) }
}

// Transaction.swift
func exampleRead(_ environment: Environment, db: Database) throws {
    let value = try environment.read { txn in try txn.get(db, key: Array("greeting".utf8)) }
    _ = value
}

func exampleCursor(_ txn: Transaction, events: Database, start: [UInt8]) throws {
    try txn.withCursor(events) { cursor in
        var entry = try cursor.seek(atLeast: start)
        while let e = entry { print(e.key); entry = try cursor.next() }
    }
}
