import java.util.List;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.hive.metastore.HiveMetaStoreClient;
import org.apache.hadoop.hive.metastore.IMetaStoreClient;
import org.apache.hadoop.hive.metastore.conf.MetastoreConf;

/**
 * Prints the databases the stock HiveMetaStoreClient lists (getAllDatabases), comma-separated:
 * the federation end-to-end test runs it through a federated proxy.
 *
 * <pre>java -cp CLASSPATH ListDatabases.java thrift://127.0.0.1:9083</pre>
 */
public class ListDatabases {
  public static void main(String[] args) throws Exception {
    Configuration conf = MetastoreConf.newMetastoreConf();
    MetastoreConf.setVar(conf, MetastoreConf.ConfVars.THRIFT_URIS, args[0]);
    MetastoreConf.setLongVar(conf, MetastoreConf.ConfVars.THRIFT_CONNECTION_RETRIES, 1);
    IMetaStoreClient c = new HiveMetaStoreClient(conf);
    try {
      List<String> dbs = c.getAllDatabases();
      System.out.println("databases=" + String.join(",", dbs));
    } finally {
      c.close();
    }
  }
}
