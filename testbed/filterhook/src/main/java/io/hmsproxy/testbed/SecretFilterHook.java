package io.hmsproxy.testbed;

import java.util.ArrayList;
import java.util.List;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.hive.metastore.DefaultMetaStoreFilterHookImpl;
import org.apache.hadoop.hive.metastore.api.MetaException;
import org.apache.hadoop.hive.metastore.api.NoSuchObjectException;
import org.apache.hadoop.hive.metastore.api.Table;
import org.apache.hadoop.hive.metastore.api.TableMeta;

/**
 * hive.metastore.filter.hook: hides secret_* tables from users other than
 * admin. HMS 3.1 runs filter hooks in its clients only; 4.0 runs them on
 * the server too with metastore.server.filter.enabled.
 */
public class SecretFilterHook extends DefaultMetaStoreFilterHookImpl {
  public SecretFilterHook(Configuration conf) {
    super(conf);
  }

  @Override
  public List<String> filterTableNames(String catName, String dbName, List<String> tables) throws MetaException {
    List<String> out = new ArrayList<>();
    for (String t : tables) {
      if (!Secret.hidden(t)) {
        out.add(t);
      }
    }
    return out;
  }

  @Override
  public List<TableMeta> filterTableMetas(List<TableMeta> metas) throws MetaException {
    List<TableMeta> out = new ArrayList<>();
    for (TableMeta m : metas) {
      if (!Secret.hidden(m.getTableName())) {
        out.add(m);
      }
    }
    return out;
  }

  @Override
  public Table filterTable(Table table) throws NoSuchObjectException {
    try {
      if (table != null && Secret.hidden(table.getTableName())) {
        throw new NoSuchObjectException(table.getDbName() + "." + table.getTableName() + " table not found");
      }
    } catch (MetaException e) {
      throw new NoSuchObjectException(e.getMessage());
    }
    return table;
  }

  @Override
  public List<Table> filterTables(List<Table> tables) throws MetaException {
    List<Table> out = new ArrayList<>();
    for (Table t : tables) {
      if (!Secret.hidden(t.getTableName())) {
        out.add(t);
      }
    }
    return out;
  }
}
