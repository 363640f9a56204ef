// Stand-ins for the Apple framework types the documentation's snippets use, with the same
// names and shapes, compiled only where the real frameworks are missing (Linux, where CI
// builds). On Apple platforms the snippets compile against WidgetKit, UserNotifications and
// SwiftUI themselves. They exist so that every snippet of README.md and docs/ is compiled
// (DocumentationTests checks that each one is in this target, verbatim); nothing else uses them.

import Foundation

#if !canImport(WidgetKit)
protocol TimelineEntry {
    var date: Date { get }
}

struct TimelineProviderContext {}

struct TimelineReloadPolicy {
    static let atEnd = TimelineReloadPolicy()
    static let never = TimelineReloadPolicy()
    static func after(_ date: Date) -> TimelineReloadPolicy { TimelineReloadPolicy() }
}

struct Timeline<Entry: TimelineEntry> {
    init(entries: [Entry], policy: TimelineReloadPolicy) {}
}

protocol TimelineProvider {
    associatedtype Entry: TimelineEntry
    typealias Context = TimelineProviderContext
    func placeholder(in context: Context) -> Entry
    func getSnapshot(in context: Context, completion: @escaping (Entry) -> Void)
    func getTimeline(in context: Context, completion: @escaping (Timeline<Entry>) -> Void)
}
#endif

#if !canImport(UserNotifications)
class UNNotificationContent: @unchecked Sendable {
    var userInfo: [AnyHashable: Any] = [:]
    var title = ""
    var subtitle = ""
    var threadIdentifier = ""
    var badge: NSNumber?
}

class UNNotificationRequest: @unchecked Sendable {
    let identifier: String = ""
    let content = UNNotificationContent()
}

class UNNotificationServiceExtension {
    func didReceive(_ request: UNNotificationRequest, withContentHandler contentHandler: @escaping (UNNotificationContent) -> Void) {}
    func serviceExtensionTimeWillExpire() {}
}
#endif

#if !canImport(SwiftUI)
enum ScenePhase: Sendable { case background, inactive, active }

protocol View {}

struct Text: View {
    init(_ text: String) {}
}

extension View {
    func onChange<V: Equatable>(of value: V, _ action: @escaping (_ oldValue: V, _ newValue: V) -> Void) -> Self { self }
}
#endif

#if !canImport(UserNotifications)
class UNUserNotificationCenter: @unchecked Sendable {
    static func current() -> UNUserNotificationCenter { UNUserNotificationCenter() }
    func setBadgeCount(_ count: Int) async throws {}
}
#endif

#if !canImport(Darwin)
extension FileManager {
    /// Apple's app-group container; on Linux a directory under /tmp, for the snippets.
    func containerURL(forSecurityApplicationGroupIdentifier groupIdentifier: String) -> URL? {
        URL(fileURLWithPath: NSTemporaryDirectory()).appendingPathComponent(groupIdentifier)
    }
}
#endif

#if !canImport(BackgroundTasks)
class BGTask: @unchecked Sendable {
    var expirationHandler: (() -> Void)?
    func setTaskCompleted(success: Bool) {}
}

class BGAppRefreshTask: BGTask, @unchecked Sendable {}

class BGTaskRequest {
    var earliestBeginDate: Date?
}

class BGAppRefreshTaskRequest: BGTaskRequest {
    init(identifier: String) {}
}

class BGTaskScheduler: @unchecked Sendable {
    static let shared = BGTaskScheduler()
    @discardableResult
    func register(forTaskWithIdentifier identifier: String, using queue: DispatchQueue?, launchHandler: @escaping @Sendable (BGTask) -> Void) -> Bool { true }
    func submit(_ taskRequest: BGTaskRequest) throws {}
}
#endif
