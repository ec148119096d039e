// Creates HMS 2.3's transaction tables (TXNS, HIVE_LOCKS, NEXT_LOCK_ID,
// ...) in the metastore database named by the hive-site.xml on the
// classpath. DataNucleus creates the other 2.3 tables on demand, but not
// these: without them lock, open_txns and the rest fail with "Table/View
// 'NEXT_LOCK_ID' does not exist". hms.sh runs this once per fresh work
// directory, before the server opens the embedded Derby database, as a
// real deployment's schematool -initSchema would. Run it as a
// single-file source program (java -cp CP PrepTxnTables.java).
public class PrepTxnTables {
  public static void main(String[] args) throws Exception {
    org.apache.hadoop.hive.metastore.txn.TxnDbUtil.prepDb(new org.apache.hadoop.hive.conf.HiveConf());
    System.out.println("HMS 2.3 transaction tables created");
  }
}
