import ArgumentParser
import Foundation
import InboxLedger

@main
struct LedgerCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ledger",
        abstract: "Inspect and operate an inbox & badge ledger.",
        discussion: "A ledger is a directory holding an LMDB environment that several processes append events to. "
            + "Exit codes: 0 ok, 1 invalid input or problems found, 2 usage, 3 cannot open the ledger, 4 storage failure.",
        subcommands: [Inspect.self, Append.self, Events.self, Widget.self, ProjectionCommand.self, Consume.self, ConsumersCommand.self, Compact.self, Verify.self, Simulate.self, SimulateRole.self, Sync.self]
    )

    /// Parses and runs, mapping ArgumentParser's usage failures to the documented exit code 2.
    static func main() async {
        // Started with stdout or stderr closed, the guard's pipe (or a ledger file) would take
        // descriptor 1 or 2: fill them with /dev/null first (docs/operations.md).
        do { try Ledger.ensureStandardDescriptors() } catch { Foundation.exit(ExitStatus.storage) }
        do {
            var command = try parseAsRoot()
            runInGuardedChild(command)
            if var asyncCommand = command as? any AsyncParsableCommand {
                try await asyncCommand.run()
            } else {
                try command.run()
            }
        } catch {
            if exitCode(for: error) == .validationFailure {
                printError(fullMessage(for: error))
                Foundation.exit(ExitStatus.usage)
            }
            exit(withError: error)
        }
    }
}

/// A command that opens a ledger does its work in a child process (``Guarded``): damage that
/// makes LMDB abort() or fault ends the child, and this process reports it; returns in the
/// child (or when no child can be started), ends this process otherwise.
private func runInGuardedChild(_ command: any ParsableCommand) {
    guard let crash = (command as? any GuardedCommand)?.crashReport else { return }
    _ = Guarded.runInChild(onSignal: crash.report)
}

/// `--durability durable|singleSync|none`.
extension LedgerDurability: ExpressibleByArgument {}

/// Options shared by every subcommand that opens a ledger.
struct LedgerLocation: ParsableArguments {
    @Argument(help: "The ledger directory.")
    var path: String

    @Flag(name: .customLong("read-only"), help: "Open without write access.")
    var readOnly = false
}
