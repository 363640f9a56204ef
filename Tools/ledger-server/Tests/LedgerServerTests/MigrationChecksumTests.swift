import Testing
@testable import ledger_server

/// Migrations are append-only (``Migrations``): a database records each one's checksum and a
/// server whose migration differs refuses to start. These are the checksums of the migrations
/// that shipped (6 as main held it at a1fbbb3); an edit of one fails here, before it fails a deployed server. A new migration
/// adds its line when it lands.
@Suite struct MigrationChecksumTests {
    static let shipped: [Int: String] = [
        1: "0cd0f98499106fe0b21fa08db4a57247056f84cf2130fb67ab18b5f07167577f",
        2: "6f1b1361722ee1816b25352d37de752896679590f02c94406e179412015027ab",
        3: "a7e8e0e2c9ff22f2d1f1ac024d0f9aefb371960ef6473c4079a794e308fb1d30",
        4: "f1a546f595b7fe454626d00a2dbdb8af6e5d0bdd43f113ea88d0a30313c458a8",
        5: "aaa57c1f78e1f3badf47e7f0ece10f802af25be2932cf4cec3b860cded2aa01f",
        6: "8b8a62c394461b6fc98b8d7f0a3811dd67900e214568c58a6c7ade27f9ac4a50",
        7: "be4c5943093b47d4dece4a59e6a5eb8dd8ab951e97b04ae6e7154d74d7c48f23",
    ]

    @Test func shippedMigrationsAreNotEdited() {
        let current = Dictionary(uniqueKeysWithValues: Migrations.all.map { ($0.version, $0.checksum) })
        for (version, checksum) in Self.shipped.sorted(by: { $0.key < $1.key }) {
            #expect(current[version] == checksum, "migration \(version) was edited after it shipped: add a new migration instead")
        }
        #expect(Set(current.keys) == Set(Self.shipped.keys), "every migration's checksum is listed here once it lands")
    }
}
